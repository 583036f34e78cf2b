#include "training/optim/fused_adamw.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>

#include "parallel/compat.h"

namespace megacpp::training::optim {
namespace {

// The constants of one parameter's step, as torch::optim::AdamW computes them.
struct AdamWStep {
  float decay, beta1, beta2, step_size, bias_correction2_sqrt, eps, grad_scale;
};

AdamWStep step_constants(const torch::optim::AdamWOptions& options, int64_t step, double grad_scale) {
  const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  return {static_cast<float>(1 - options.lr() * options.weight_decay()), static_cast<float>(beta1), static_cast<float>(beta2),
          static_cast<float>(options.lr() / bias_correction1), static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(options.eps()), static_cast<float>(grad_scale)};
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void adamw_elements(const AdamWStep& s, const float* grad, int64_t n, float* param, float* exp_avg, float* exp_avg_sq) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    const float m = exp_avg[i] * s.beta1 + (1.0f - s.beta1) * g;
    const float v = exp_avg_sq[i] * s.beta2 + (1.0f - s.beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * s.decay - s.step_size * m / (std::sqrt(v) / s.bias_correction2_sqrt + s.eps);
  }
}

bool takes(const at::Tensor& t) {
  return t.layout() == c10::kStrided && t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

}  // namespace

bool FusedAdamW::takes_every_parameter() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!takes(p) || !takes(p.grad())) return false;
      const auto found = state_.find(parallel::compat::optimizer_state_key(p));
      if (found == state_.end()) continue;
      const auto& state = static_cast<const torch::optim::AdamWParamState&>(*found->second);
      if (!takes(state.exp_avg()) || !takes(state.exp_avg_sq())) return false;
    }
  }
  return true;
}

torch::optim::AdamWParamState& FusedAdamW::state_of(const at::Tensor& p) {
  auto& slot = state_[parallel::compat::optimizer_state_key(p)];
  if (!slot) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(0);
    state->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    state->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    slot = std::move(state);
  }
  return static_cast<torch::optim::AdamWParamState&>(*slot);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const double scale = gradient_scale_;
  gradient_scale_ = 1.0;
  if (takes_every_parameter()) {
    fused_step(scale);
    return loss;
  }
  if (scale != 1.0) {
    for (auto& group : param_groups_) {
      for (auto& p : group.params()) {
        if (p.grad().defined()) p.mutable_grad().mul_(scale);
      }
    }
  }
  torch::optim::AdamW::step();
  return loss;
}

void FusedAdamW::fused_step(double grad_scale) {
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = state_of(p);
      state.step(state.step() + 1);
      const AdamWStep constants = step_constants(options, state.step(), grad_scale);
      float* param = p.data_ptr<float>();
      float* exp_avg = state.exp_avg().data_ptr<float>();
      float* exp_avg_sq = state.exp_avg_sq().data_ptr<float>();
      const float* g = p.grad().data_ptr<float>();
      at::parallel_for(0, p.numel(), 65536, [&](int64_t begin, int64_t end) {
        adamw_elements(constants, g + begin, end - begin, param + begin, exp_avg + begin, exp_avg_sq + begin);
      });
    }
  }
}

}  // namespace megacpp::training::optim
