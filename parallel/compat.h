// Note [libtorch versions]
// megacpp builds against Debian's libtorch 1.13 (CPU) and the libtorch of an installed
// PyTorch 2.x (CUDA). Every difference between them lives in this header:
//  - c10d's process-group classes: 1.13 backends derive from c10d::ProcessGroup, 2.x from
//    c10d::Backend. Both expose the same collective calls, so the rest of the code talks to
//    `CommBackend`.
//  - 1.13's ProcessGroupGloo throws for `_allgather_base` and `reduce_scatter`;
//    collectives.cpp emulates the all-gather when `kGlooHasTensorCollectives` is false and
//    the reduce-scatter on every Gloo build (Note [Gloo emulations]).
//  - 1.13 has no scaled_dot_product_attention (see `causal_attention`).
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace megacpp::parallel::compat {

#if TORCH_VERSION_MAJOR >= 2
using CommBackend = c10d::Backend;
inline constexpr bool kGlooHasTensorCollectives = true;
inline constexpr bool kCpuHalfMatmul = true;
#else
using CommBackend = c10d::ProcessGroup;
inline constexpr bool kGlooHasTensorCollectives = false;
inline constexpr bool kCpuHalfMatmul = false;  // 1.13 has no fp16 addmm on CPU
#endif

}  // namespace megacpp::parallel::compat

#include <ATen/core/Tensor.h>

namespace megacpp::parallel::compat {

// softmax(q k^T / sqrt(d) + causal mask) v for q, k, v [batch, heads, seq, head_dim]; the
// softmax runs in fp32 (as Hugging Face's eager attention does). Uses the fused kernel on
// libtorch 2.x.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace megacpp::parallel::compat
