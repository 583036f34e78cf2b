// Megatron's learning-rate schedule (OptimizerParamScheduler), counted in samples as Megatron
// counts it: linear warmup from --lr-warmup-init to --lr, then constant, linear or cosine decay
// to --min-lr, constant after. The iteration flags (--lr-warmup-iters, --lr-decay-iters) are
// the sample ones times the global batch; --lr-warmup-fraction is a share of the decay.
#pragma once

#include <cstdint>
#include <string>

#include "megacpp/arguments.h"

namespace megacpp::training {

class LearningRateSchedule {
 public:
  // From the flags; `global_batch` converts iterations to samples.
  LearningRateSchedule(const TrainingArguments& args, int64_t global_batch);
  // The rate for iteration `iteration` (1-based): the one at iteration × global batch samples.
  double at(int64_t iteration) const;

  // Megatron's opt_param_scheduler fields, in samples.
  double warmup_samples() const { return warmup_samples_; }
  int64_t decay_samples() const { return decay_samples_; }
  int64_t samples_at(int64_t iteration) const { return iteration * global_batch_; }

 private:
  double max_lr_, min_lr_, init_lr_;
  double warmup_samples_;
  int64_t decay_samples_, global_batch_;
  std::string style_;
};

// Megatron's train_iters for --train-samples: the whole global batches in it.
int64_t train_iterations(const TrainingArguments& args, int64_t global_batch);

}  // namespace megacpp::training
