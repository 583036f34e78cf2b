// Megatron's --check-for-nan-in-loss-and-grad: every iteration the ranks share their loss and
// whether their gradients are finite, so that a NaN or Inf on any rank stops all of them at once,
// before the optimizer step, naming the iteration, the value and the ranks.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/Device.h>

#include "parallel/group.h"

namespace megacpp::training::step {

struct StepHealth {
  double mean_loss = 0;                    // the loss averaged over ranks
  std::vector<int> nonfinite_loss_ranks;   // global ranks whose own loss is NaN or Inf
  std::vector<double> nonfinite_losses;    // their losses
  std::vector<int> nonfinite_grad_ranks;   // global ranks whose own gradients are not finite
};

// Collective over `world` (one all-reduce of 2 x world-size values): each rank's mean loss over
// its micro-batches and whether its gradients are finite.
StepHealth gather_step_health(const parallel::Group& world, double local_loss, bool local_grads_finite,
                              const c10::Device& device);

// Throws std::runtime_error unless the loss of every rank and the gradient norm are finite. The
// message names `iteration`, which values are not finite and on which ranks. With
// `gradients_may_overflow` (a loss scaler, which skips such steps) only the loss is checked.
void require_finite_step(const StepHealth& health, double grad_norm, int64_t iteration, bool gradients_may_overflow = false);

}  // namespace megacpp::training::step
