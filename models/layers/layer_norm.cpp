#include "models/layers/layer_norm.h"

#include <torch/torch.h>

namespace megacpp::models {

LayerNorm::LayerNorm(int64_t dim, double eps, const at::TensorOptions& options, bool zero_centered_gamma)
    : parallel::Module("LayerNorm"), eps_(eps), zero_centered_gamma_(zero_centered_gamma) {
  register_slot("weight", weight_, torch::empty({dim}, options));
  register_slot("bias", bias_, torch::empty({dim}, options));
}

at::Tensor LayerNorm::forward(const at::Tensor& input) {
  const at::Tensor scale = zero_centered_gamma_ ? weight_ + 1 : weight_;
  return torch::layer_norm(input, {input.size(-1)}, scale, bias_, eps_);
}

}  // namespace megacpp::models
