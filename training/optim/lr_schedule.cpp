#include "training/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "megacpp/checked_math.h"

namespace megacpp::training::optim {

LearningRateSchedule::LearningRateSchedule(const settings::TrainingArguments& args, int64_t global_batch)
    : max_lr_(args.lr), min_lr_(args.min_lr), init_lr_(args.lr_warmup_init),
      decoupled_max_lr_(args.decoupled_lr >= 0 ? args.decoupled_lr : args.lr),
      decoupled_min_lr_(args.decoupled_lr >= 0 && args.decoupled_min_lr >= 0 ? args.decoupled_min_lr : args.min_lr),
      global_batch_(global_batch), style_(args.lr_decay_style) {
  if (style_ != "constant" && style_ != "linear" && style_ != "cosine") {
    throw std::invalid_argument("--lr-decay-style must be constant, linear or cosine (got '" + style_ + "')");
  }
  const NamedValue batch{global_batch, "the global batch"};
  if (args.train_samples > 0) {
    decay_samples_ = args.lr_decay_samples > 0 ? args.lr_decay_samples : args.train_samples;
    warmup_samples_ = static_cast<double>(args.lr_warmup_samples);
  } else {
    const int64_t decay_iters = args.lr_decay_iters > 0 ? args.lr_decay_iters : args.train_iters;
    decay_samples_ = checked_product({{decay_iters, "--lr-decay-iters"}, batch}, "the decay samples");
    warmup_samples_ = static_cast<double>(checked_product({{args.lr_warmup_iters, "--lr-warmup-iters"}, batch}, "the warmup samples"));
  }
  if (args.lr_warmup_fraction >= 0) warmup_samples_ = args.lr_warmup_fraction * static_cast<double>(decay_samples_);
}

// Megatron's get_lr(param_group), with num_steps = `samples` (those of the steps taken by the end
// of the iteration) and the group's max_lr / min_lr.
double LearningRateSchedule::rate(int64_t sample_count, double max_lr, double min_lr) const {
  const double samples = static_cast<double>(sample_count);
  if (warmup_samples_ > 0 && samples <= warmup_samples_) return init_lr_ + (max_lr - init_lr_) * samples / warmup_samples_;
  if (style_ == "constant") return max_lr;
  const double decay = static_cast<double>(decay_samples_);
  if (samples > decay || decay <= warmup_samples_) return min_lr;
  const double ratio = (samples - warmup_samples_) / (decay - warmup_samples_);
  const double coefficient = style_ == "linear" ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr + coefficient * (max_lr - min_lr);
}

}  // namespace megacpp::training::optim
