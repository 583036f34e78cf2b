#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// RMSNorm over the last dimension as one kernel each way (Note [Fused kernels]): x [..., dim],
// weight [dim] of x's type; the scale is 1 + weight with a zero-centered gamma. Differentiable
// in x and weight; saves x and one fp32 reciprocal RMS per row for backward.
at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, bool zero_centered_gamma);

}  // namespace megacpp::models::kernels
