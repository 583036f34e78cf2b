// The forward and backward passes of one iteration over its micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "megacpp/training/training_data.h"
#include "models/language_model.h"

namespace megacpp::training {

struct ForwardBackwardSetup {
  c10::Device device = c10::Device(c10::kCPU);
  int64_t seq_length = 0;
  double loss_scale = 1.0;  // --fp16's (1 without a scaler)
  bool fsdp = false;        // sharded with FSDP2: gradients are reduced after the last micro-batch only
};

struct ForwardBackwardResult {
  double mean_loss = 0;                         // lm loss, averaged over this rank's micro-batches
  std::vector<models::AuxiliaryLoss> auxiliary;  // the model's, averaged over them too
};

// Each micro-batch (tokens [micro, seq + 1], and images): forward, the language-model loss, and backward
// of loss * loss scale / micro-batches (the model's auxiliary losses scaled alike, Note
// [Load-balancing loss]). `before_micro_batch(m)` runs first for each (a heartbeat).
ForwardBackwardResult forward_backward(models::LanguageModel& model, const std::vector<MicroBatch>& micro_batches,
                                       const ForwardBackwardSetup& setup,
                                       const std::function<void(int64_t)>& before_micro_batch);

}  // namespace megacpp::training
