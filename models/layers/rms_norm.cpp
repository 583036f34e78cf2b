#include "models/layers/rms_norm.h"

#include <torch/torch.h>

#include "models/kernels/fusion.h"
#include "models/kernels/rms_norm_kernel.h"

namespace megacpp::models {

RMSNorm::RMSNorm(int64_t dim, double eps, const at::TensorOptions& options, bool zero_centered_gamma)
    : parallel::Module("RMSNorm"), eps_(eps), zero_centered_gamma_(zero_centered_gamma) {
  register_slot("weight", weight_, torch::empty({dim}, options));
}

at::Tensor RMSNorm::forward(const at::Tensor& input) {
  if (kernels::kernel_fusion().rms_norm && kernels::fusable(input) && input.scalar_type() == weight_.scalar_type()) {
    return kernels::fused_rms_norm(input, weight_, eps_, zero_centered_gamma_);
  }
  at::Tensor x = input.to(torch::kFloat);
  x = x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  x = x.to(input.scalar_type());
  return zero_centered_gamma_ ? x + weight_ * x : weight_ * x;
}

}  // namespace megacpp::models
