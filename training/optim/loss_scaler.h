// Megatron's gradient scalers. With --fp16 the loss is multiplied by a scale before backward, so
// small fp16 gradients do not underflow, and the gradients are divided by it before clipping and
// the step. An iteration whose gradients overflowed (are not finite on some rank) is skipped:
// no optimizer step, and the learning-rate schedule does not advance. The dynamic scale
// (DynamicGradScaler) starts at --initial-loss-scale, halves after --hysteresis overflowing
// iterations (not below --min-loss-scale) and doubles after --loss-scale-window iterations
// without one; --loss-scale S keeps it at S (ConstantGradScaler, with --bf16 too).
#pragma once

#include <cstdint>

#include "settings/arguments.h"

namespace megacpp::training::optim {

struct LossScalerState {
  double scale = 1.0;
  int64_t growth_tracker = 0;      // iterations since the last overflow or growth
  int64_t hysteresis_tracker = 0;  // overflows left before the scale is lowered
};

class LossScaler {
 public:
  explicit LossScaler(const settings::TrainingArguments& args);

  bool enabled() const { return enabled_; }
  double scale() const { return state_.scale; }
  // After an iteration's backward: `overflow` says whether any rank's gradients are not finite.
  void update(bool overflow);

  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state) { state_ = state; }

 private:
  bool enabled_, dynamic_;
  double min_scale_;
  int64_t window_, hysteresis_;
  LossScalerState state_;
};

}  // namespace megacpp::training::optim
