// Megatron's learning-rate schedule (OptimizerParamScheduler), counted in samples as Megatron
// counts it: linear warmup from --lr-warmup-init to --lr, then constant, linear or cosine decay
// to --min-lr, constant after. The iteration flags (--lr-warmup-iters, --lr-decay-iters) are
// the sample ones times the global batch; --lr-warmup-fraction is a share of the decay. The input
// and output layers follow the same schedule between --decoupled-lr and --decoupled-min-lr.
#pragma once

#include <cstdint>
#include <string>

#include "settings/arguments.h"

namespace megacpp::training::optim {

class LearningRateSchedule {
 public:
  // From the flags; `global_batch` converts iterations to samples.
  LearningRateSchedule(const settings::TrainingArguments& args, int64_t global_batch);
  // The rates once `samples` samples have been stepped on: the trainer passes the samples
  // consumed by the end of the iteration less those of iterations --fp16 skipped (Megatron's
  // scheduler does not count them); a ramped-up batch varies per iteration. The decoupled rate
  // is that of the input and output layers (at_samples unless --decoupled-lr is given).
  double at_samples(int64_t samples) const { return rate(samples, max_lr_, min_lr_); }
  double decoupled_at_samples(int64_t samples) const { return rate(samples, decoupled_max_lr_, decoupled_min_lr_); }
  // The same for iteration `iteration` (1-based) of a constant batch: iteration × global batch samples.
  double at(int64_t iteration) const { return at_samples(samples_at(iteration)); }
  double decoupled_at(int64_t iteration) const { return decoupled_at_samples(samples_at(iteration)); }

  // Megatron's opt_param_scheduler fields, in samples.
  double warmup_samples() const { return warmup_samples_; }
  int64_t decay_samples() const { return decay_samples_; }
  int64_t samples_at(int64_t iteration) const { return iteration * global_batch_; }

 private:
  double rate(int64_t samples, double max_lr, double min_lr) const;

  double max_lr_, min_lr_, init_lr_;
  double decoupled_max_lr_, decoupled_min_lr_;
  double warmup_samples_;
  int64_t decay_samples_, global_batch_;
  std::string style_;
};

}  // namespace megacpp::training::optim
