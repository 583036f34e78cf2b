#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// torch::linear(input, weight, bias). For bf16 or half tensors on the CPU (kernel fusion on, Note
// [Fused kernels]) the products are taken in fp32 and each output rounded once to the tensors'
// type, in both directions: what a bf16 GEMM with fp32 accumulation computes, through BLAS's
// sgemm instead of libtorch's scalar loop, which is about ten times slower on CPUs without bf16
// instructions. It saves the inputs in their own type (no fp32 copy kept for backward) and
// computes only the gradients asked for (a frozen weight gets none).
at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace megacpp::models::kernels
