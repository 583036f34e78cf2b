#pragma once

#include "parallel/module.h"

namespace megacpp::models {

// x / sqrt(mean(x^2) + eps) * weight, computed in fp32 as Hugging Face's LlamaRMSNorm. With a
// zero-centered gamma (Megatron's --apply-layernorm-1p) the scale is 1 + weight, and the weight
// starts at 0: weight decay then pulls the scale towards 1, not 0.
class RMSNorm : public parallel::Module {
 public:
  RMSNorm(int64_t dim, double eps, const at::TensorOptions& options, bool zero_centered_gamma = false);

  // What init_weights fills the weight with: the scale 1.
  double initial_weight() const { return zero_centered_gamma_ ? 0.0 : 1.0; }

 protected:
  at::Tensor forward(const at::Tensor& input) override;

 private:
  double eps_;
  bool zero_centered_gamma_;
  at::Tensor weight_;  // [dim]
};

}  // namespace megacpp::models
