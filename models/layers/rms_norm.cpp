#include "models/layers/rms_norm.h"

#include <torch/torch.h>

namespace megacpp::models {

RMSNorm::RMSNorm(int64_t dim, double eps, const at::TensorOptions& options)
    : parallel::Module("RMSNorm"), eps_(eps) {
  register_slot("weight", weight_, torch::empty({dim}, options));
}

at::Tensor RMSNorm::forward(const at::Tensor& input) {
  at::Tensor x = input.to(torch::kFloat);
  x = x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight_ * x.to(input.scalar_type());
}

}  // namespace megacpp::models
