// The forward and backward passes of one iteration over its micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "training/data/training_data.h"
#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::training::step {

struct ForwardBackwardSetup {
  c10::Device device = c10::Device(c10::kCPU);
  double loss_scale = 1.0;  // --fp16's (1 without a scaler)
  bool fsdp = false;        // sharded with FSDP2: gradients are reduced after the last micro-batch only
  parallel::Group cp = parallel::Group::single(0);  // splits each sequence (Note [Ulysses])
  parallel::Group vocab = parallel::Group::single(0);    // splits the logits (Note [Vocabulary parallelism])
  // Megatron's --calculate-per-token-loss: the loss summed over the labels of every micro-batch
  // on every rank, divided by their count (not a mean of micro-batch means). Needs the world and
  // the data-parallel size the engine divides summed gradients by.
  bool per_token_loss = false;
  parallel::Group world = parallel::Group::single(0);
  int data_parallel_size = 1;
};

struct ForwardBackwardResult {
  // lm loss, averaged over this rank's micro-batches; with Ulysses, the group size times this
  // rank's share (averaged over the group's ranks: the loss of their sequences). With
  // per_token_loss, this rank's summed loss times the world size over the global batch's labels,
  // so that the mean over ranks is the per-token loss.
  double mean_loss = 0;
  std::vector<models::AuxiliaryLoss> auxiliary;  // the model's, averaged over them too
};

// Each micro-batch (tokens [micro, seq + 1], and images): forward, the language-model loss, and backward
// of loss * loss scale / micro-batches (the model's auxiliary losses scaled alike, Note
// [Load-balancing loss]). `before_micro_batch(m)` runs first for each (a heartbeat). With
// Ulysses, the auxiliary losses of each rank's slice are scaled down by the group size: the
// engine divides gradients summed over all ranks by the data-parallel size only.
ForwardBackwardResult forward_backward(models::LanguageModel& model, const std::vector<data::MicroBatch>& micro_batches,
                                       const ForwardBackwardSetup& setup,
                                       const std::function<void(int64_t)>& before_micro_batch);

}  // namespace megacpp::training::step
