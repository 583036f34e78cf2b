// AdamW whose step is one pass over each parameter (Note [Fused kernels] in
// models/kernels/fusion.h): the decay, both moments and the update read and write each element
// once, where torch::optim::AdamW makes a temporary per operation (mul_, add_, addcmul_, sqrt,
// div, add_, addcdiv_). The same state (step, exp_avg, exp_avg_sq under libtorch's keys), so
// checkpoints and memory reports see a torch::optim::AdamW; parameters the pass does not take
// (not fp32 contiguous CPU tensors, or amsgrad) step through the same formula in ATen ops.
#pragma once

#include <torch/optim/adamw.h>

#include <vector>

namespace megacpp::training {

class FusedAdamW : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::AdamWOptions defaults)
      : torch::optim::AdamW(std::move(param_groups), std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  torch::optim::AdamWParamState& state_of(const at::Tensor& p, bool amsgrad);
};

}  // namespace megacpp::training
