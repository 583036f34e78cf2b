#include "megacpp/training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace megacpp::training {

LearningRateSchedule::LearningRateSchedule(double max_lr, double min_lr, int64_t warmup_iters, int64_t decay_iters,
                                           std::string style)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_iters_(warmup_iters), decay_iters_(decay_iters), style_(std::move(style)) {
  if (style_ != "constant" && style_ != "linear" && style_ != "cosine") {
    throw std::invalid_argument("--lr-decay-style must be constant, linear or cosine (got '" + style_ + "')");
  }
}

double LearningRateSchedule::at(int64_t iteration) const {
  if (warmup_iters_ > 0 && iteration <= warmup_iters_) {
    return max_lr_ * static_cast<double>(iteration) / static_cast<double>(warmup_iters_);
  }
  if (style_ == "constant") return max_lr_;
  if (iteration > decay_iters_ || decay_iters_ <= warmup_iters_) return min_lr_;
  const double ratio = static_cast<double>(iteration - warmup_iters_) / static_cast<double>(decay_iters_ - warmup_iters_);
  const double coefficient = style_ == "linear" ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr_ + coefficient * (max_lr_ - min_lr_);
}

}  // namespace megacpp::training
