// Rotary position embeddings (RoPE) in Hugging Face Llama's layout: the head dimension is
// split in two halves that rotate together (rotate_half), not interleaved pairs.
#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {}
  // x [batch, heads, seq, head_dim] rotated by position 0..seq-1, or by `position_ids`
  // [batch, seq] (each in [0, seq)) when given.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& position_ids = {}) const;

 private:
  int64_t head_dim_;
  double theta_;
  mutable at::Tensor cos_, sin_;  // [seq, head_dim] fp32 cache for the last seq length/device
};

}  // namespace megacpp::models
