// Megatron's --rampup-batch-size START INCREMENT SAMPLES (its RampupBatchsizeNumMicroBatches-
// Calculator): the global batch starts at START and grows by INCREMENT every SAMPLES / ((GLOBAL -
// START) / INCREMENT) consumed samples until it reaches --global-batch-size, after SAMPLES
// samples. Each iteration's batch follows from the samples consumed before it, so it is the same
// at every world size and after a resume. Without the flag every batch is the global batch.
#pragma once

#include <cstdint>
#include <string>

#include "settings/training_arguments.h"

namespace megacpp::settings {

class BatchRampup {
 public:
  // `micro_step`: samples per micro-batch over the data-parallel ranks. Throws
  // std::invalid_argument naming --rampup-batch-size for a ramp whose batches are not whole
  // micro-steps or that does not end at the global batch.
  BatchRampup(const TrainingArguments& args, int64_t global_batch, int64_t micro_step);

  bool ramps() const { return start_ > 0; }
  int64_t global_batch() const { return global_; }
  // The global batch of the iteration that starts after `consumed` samples.
  int64_t batch_at(int64_t consumed) const;
  int64_t accumulation_at(int64_t consumed) const { return batch_at(consumed) / micro_step_; }
  // Megatron's train_iters for --train-samples: the iterations of the ramp, then whole global batches.
  int64_t iterations_for_samples(int64_t samples) const;
  // The samples `iterations` iterations read from the start.
  int64_t samples_for_iterations(int64_t iterations) const;
  // "from 16 to 64 samples, +16 every 100 samples" for the start-up log.
  std::string describe() const;

 private:
  int64_t start_ = 0, increment_ = 0, ramp_samples_ = 0;
  double samples_per_increment_ = 0;
  int64_t global_, micro_step_;
};

}  // namespace megacpp::settings
