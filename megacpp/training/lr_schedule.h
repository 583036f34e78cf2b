// Megatron's learning-rate schedule: linear warmup to --lr, then constant, linear or cosine
// decay to --min-lr over --lr-decay-iters, constant after.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::training {

class LearningRateSchedule {
 public:
  LearningRateSchedule(double max_lr, double min_lr, int64_t warmup_iters, int64_t decay_iters, std::string style);
  // The rate for iteration `iteration` (1-based).
  double at(int64_t iteration) const;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_iters_, decay_iters_;
  std::string style_;
};

}  // namespace megacpp::training
