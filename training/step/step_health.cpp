#include "training/step/step_health.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <spdlog/fmt/ranges.h>
#include <torch/torch.h>

#include "parallel/collectives.h"

namespace megacpp::training::step {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

StepHealth gather_step_health(const parallel::Group& world, double local_loss, bool local_grads_finite,
                              const c10::Device& device) {
  // Slot r holds rank r's loss and slot size + r its gradient flag; the other ranks add zeros,
  // so a NaN stays in its own rank's slot.
  const int size = world.size();
  at::Tensor slots = torch::zeros({2 * size}, torch::TensorOptions().dtype(torch::kDouble));
  slots[world.rank] = local_loss;
  slots[size + world.rank] = local_grads_finite ? 0.0 : 1.0;
  slots = slots.to(device);
  parallel::all_reduce(world, slots, parallel::ReduceOp::kSum).wait();
  slots = slots.cpu();
  const double* values = slots.data_ptr<double>();
  StepHealth health;
  for (int r = 0; r < size; ++r) {
    health.mean_loss += values[r] / size;
    if (!std::isfinite(values[r])) {
      health.nonfinite_loss_ranks.push_back(world.global_ranks[r]);
      health.nonfinite_losses.push_back(values[r]);
    }
    if (values[size + r] != 0) health.nonfinite_grad_ranks.push_back(world.global_ranks[r]);
  }
  return health;
}

void require_finite_step(const StepHealth& health, double grad_norm, int64_t iteration, bool gradients_may_overflow) {
  std::vector<std::string> problems;
  if (!health.nonfinite_loss_ranks.empty()) {
    problems.push_back(fmt::format("the loss is {} on {}", fmt::join(health.nonfinite_losses, ", "),
                                   rank_list(health.nonfinite_loss_ranks)));
  }
  if (gradients_may_overflow) {
    // the loss scaler skips the step
  } else if (!health.nonfinite_grad_ranks.empty()) {
    problems.push_back(fmt::format("the gradient norm is {}, from the gradients of {}", grad_norm,
                                   rank_list(health.nonfinite_grad_ranks)));
  } else if (!std::isfinite(grad_norm)) {
    problems.push_back(fmt::format("the gradient norm is {} (every rank's gradients are finite; their sum of squares overflows)",
                                   grad_norm));
  }
  if (problems.empty()) return;
  throw std::runtime_error(fmt::format(
      "iteration {}: {}. Stopped before the optimizer step; no checkpoint of this state is saved "
      "(a lower --lr or --init-method-std may help; --no-check-for-nan-in-loss-and-grad turns this check off)",
      iteration, fmt::join(problems, "; ")));
}

}  // namespace megacpp::training::step
