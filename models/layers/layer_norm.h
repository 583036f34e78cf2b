#pragma once

#include "parallel/module.h"

namespace megacpp::models {

// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension (biased variance), as
// torch.nn.LayerNorm. With a zero-centered gamma (Megatron's --apply-layernorm-1p) the scale
// is 1 + weight and the weight starts at 0.
class LayerNorm : public parallel::Module {
 public:
  LayerNorm(int64_t dim, double eps, const at::TensorOptions& options, bool zero_centered_gamma = false);

  // What init_weights fills the weight with: the scale 1 (the bias starts at 0).
  double initial_weight() const { return zero_centered_gamma_ ? 0.0 : 1.0; }

 protected:
  at::Tensor forward(const at::Tensor& input) override;

 private:
  double eps_;
  bool zero_centered_gamma_;
  at::Tensor weight_, bias_;  // [dim]
};

}  // namespace megacpp::models
