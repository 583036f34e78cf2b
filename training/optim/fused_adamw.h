// AdamW whose step is one pass over each parameter (Note [Fused kernels] in
// models/kernels/fusion.h): the decay, both moments and the update read and write each element
// once, where torch::optim::AdamW makes a temporary per operation (mul_, add_, addcmul_, sqrt,
// div, add_, addcdiv_). The same state (step, exp_avg, exp_avg_sq under libtorch's keys), so
// checkpoints and memory reports see a torch::optim::AdamW. An optimizer holding a parameter the
// pass does not take (not an fp32 contiguous CPU tensor, or amsgrad) steps as torch::optim::AdamW.
// Gradient clipping joins the pass: scale_gradients(c) makes the next step read each gradient
// times c, so clipping costs no pass of its own (the gradients in memory stay unscaled).
#pragma once

#include <torch/optim/adamw.h>

#include <vector>

namespace megacpp::training::optim {

class FusedAdamW : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::AdamWOptions defaults)
      : torch::optim::AdamW(std::move(param_groups), std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  // The next step (only) uses factor x each gradient, e.g. the clipping coefficient
  // max_norm / (norm + 1e-6). A step through the base class scales the gradients in place first.
  void scale_gradients(double factor) { gradient_scale_ = factor; }

 private:
  bool takes_every_parameter() const;
  torch::optim::AdamWParamState& state_of(const at::Tensor& p);
  void fused_step(double grad_scale);

  double gradient_scale_ = 1.0;
};

}  // namespace megacpp::training::optim
