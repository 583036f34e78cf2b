#include "training/optim/loss_scaler.h"

#include <algorithm>

namespace megacpp::training::optim {

LossScaler::LossScaler(const settings::TrainingArguments& args)
    : enabled_(args.fp16 || args.loss_scale > 0), dynamic_(args.loss_scale <= 0), min_scale_(args.min_loss_scale),
      window_(args.loss_scale_window), hysteresis_(args.hysteresis) {
  state_.scale = !enabled_ ? 1.0 : dynamic_ ? args.initial_loss_scale : args.loss_scale;
  state_.hysteresis_tracker = hysteresis_;
}

// DynamicGradScaler.update: the growth count restarts at every overflow; the scale is lowered
// once `hysteresis` overflows have been seen since the last growth.
void LossScaler::update(bool overflow) {
  if (!enabled_ || !dynamic_) return;
  if (overflow) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale * 0.5, min_scale_);
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker == window_) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = hysteresis_;
    state_.scale *= 2.0;
  }
}

}  // namespace megacpp::training::optim
