// Note [Fused kernels]
// ~~~~~~~~~~~~~~~~~~~~
// On the CPU, the elementwise parts of a Llama layer run as fused kernels with their own
// backward (torch::autograd::Function): RMSNorm, the rotary embedding, SwiGLU and the
// cross-entropy of the output layer; bf16 and half Linear layers take their products in fp32
// through BLAS (linear_kernel.h); on libtorch 1.13, which has no fused attention, causal
// attention over long sequences runs as blocks with an online softmax (flash_attention.h). Each reads its inputs once and writes its output once,
// where libtorch's composition of the same formula makes a temporary per operation (pow, mean,
// rsqrt, two muls for RMSNorm; log_softmax's [tokens, vocab] output, zeros and a scatter for the
// loss) and saves more of them for backward. They compute in fp32 whatever the tensors' type
// (float, bf16, half) and fall back to the composition elsewhere (CUDA, fp64, a meta tensor).
// Megatron's and MindSpeed's switches choose: --no-rope-fusion, --no-bias-swiglu-fusion, and
// --no-kernel-fusion for all of them (the composition, as a reference and for comparison);
// MindSpeed's --use-fused-rmsnorm/-swiglu/-rotary-pos-emb and Megatron's
// --cross-entropy-loss-fusion ask for what is already on. tests/unit/test_fused_kernels.cpp
// checks each against the composition, values and gradients; docs/performance.md measures them.
#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

struct KernelFusion {
  bool rms_norm = true;
  bool rope = true;
  bool swiglu = true;
  bool cross_entropy = true;
  bool attention = true;  // libtorch 1.13 only: 2.x has scaled_dot_product_attention's flash kernel
  bool linear = true;     // bf16 / half Linear layers as fp32 products (linear_kernel.h)
};

// The process-wide choice (as libtorch's backend switches), set once from the flags.
const KernelFusion& kernel_fusion();
void set_kernel_fusion(const KernelFusion& fusion);

// A tensor the fused kernels take: on the CPU, strided (not meta or sparse), fp32, bf16 or half.
bool fusable(const at::Tensor& t);

}  // namespace megacpp::models::kernels
