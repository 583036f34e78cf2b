#include "models/layers/core_attention.h"

#include "parallel/compat.h"

namespace megacpp::models {

CoreAttention::CoreAttention(double dropout) : parallel::Module("CoreAttention"), dropout_(dropout) {}

parallel::Module::Tensors CoreAttention::forward_tensors(const Tensors& qkv) {
  TORCH_CHECK(qkv.size() == 3, "CoreAttention takes q, k and v, got ", qkv.size(), " tensors");
  return {parallel::compat::causal_attention(qkv[0], qkv[1], qkv[2], is_training() ? dropout_ : 0.0)};
}

}  // namespace megacpp::models
