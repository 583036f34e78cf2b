#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// The rotary embedding in Hugging Face's rotate_half layout, x * cos + rotate_half(x) * sin, as
// one kernel each way (Note [Fused kernels]): x [batch, heads, seq, head_dim] of any strides with
// the head dimension contiguous (a transposed projection is read in place); cos and sin fp32
// [seq, head_dim] or, per sample (position ids), [batch, seq, head_dim]. Differentiable in x;
// the result and x's gradient are contiguous.
at::Tensor fused_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace megacpp::models::kernels
