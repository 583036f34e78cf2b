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
//  - 2.4+ TCPStores default to a libuv server, which Debian's libtorch is built without
//    (`make_tcp_store`).
//  - torch::optim keys its per-parameter state by the TensorImpl's address printed as a
//    string in 1.13 and by the address itself in 2.x (`optimizer_state_key`).
//  - The profiler's events give their times in microseconds in 1.13, nanoseconds in 2.x
//    (`profiler_start_us`, `profiler_duration_us`).
//  - Autograd nodes are owned by std::shared_ptr with deleteNode up to PyTorch 2.11 at least, by
//    c10::intrusive_ptr in later ones (2.14) (`make_autograd_node`).
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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
#include <c10/util/string_utils.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace megacpp::parallel::compat {

// The key of `parameter`'s entry in torch::optim::Optimizer::state().
#if TORCH_VERSION_MAJOR >= 2
inline void* optimizer_state_key(const at::Tensor& parameter) { return parameter.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const at::Tensor& parameter) {
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
}
#endif

// A custom autograd node of type T, owned as this libtorch's autograd owns nodes: by an
// intrusive_ptr where Node is an intrusive_ptr_target (later PyTorch), else by a shared_ptr
// whose deleter is deleteNode (named without its namespace, so that it is looked up only where
// this branch is compiled), which frees a long graph without deep recursion.
template <typename T, typename... Args>
auto make_autograd_node(Args&&... args) {
  if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, T>) {
    return c10::make_intrusive<T>(std::forward<Args>(args)...);
  } else {
    return std::shared_ptr<T>(new T(std::forward<Args>(args)...), [](T* node) { deleteNode(node); });
  }
}

// A TCPStore on `host` (server or client, as `options` say). Where the libtorch has the libuv
// server (2.4+), it is used unless PyTorch's own switch USE_LIBUV=0 is set or this libtorch was
// built without libuv (Debian's), in which case the classic server serves.
c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, c10d::TCPStoreOptions options);

// softmax(q k^T / sqrt(d) + causal mask) v for q, k, v [batch, heads, seq, head_dim], the
// softmax in fp32 (as Hugging Face's eager attention). libtorch 2.x: the fused
// scaled_dot_product_attention (flash attention on CPU and GPU); 1.13: blocks of query rows,
// each against the keys up to its end. With dropout_p > 0 the attention probabilities are
// dropped out (zeroed with probability dropout_p, the rest scaled by 1 / (1 - dropout_p)).
// `visible` [batch or 1, 1, seq, seq] bool, when given, also hides key j from query i where it is
// false (the documents packed into one sequence, Megatron's --reset-attention-mask; a sliding
// window); 2.x then runs scaled_dot_product_attention with that mask (its memory-efficient
// kernel on GPU).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p = 0.0,
                            const at::Tensor& visible = {});

}  // namespace megacpp::parallel::compat

namespace torch::autograd::profiler {
struct KinetoEvent;
}

namespace megacpp::parallel::compat {

// A profiler event's start (since the epoch) and duration, in microseconds.
double profiler_start_us(const torch::autograd::profiler::KinetoEvent& event);
double profiler_duration_us(const torch::autograd::profiler::KinetoEvent& event);

}  // namespace megacpp::parallel::compat
