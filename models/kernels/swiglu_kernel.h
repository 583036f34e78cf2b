#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// silu(gate) * up elementwise as one kernel each way (Note [Fused kernels]): gate and up of one
// shape and type; saves the two for backward, which writes both gradients in one pass.
at::Tensor fused_swiglu(const at::Tensor& gate, const at::Tensor& up);

}  // namespace megacpp::models::kernels
