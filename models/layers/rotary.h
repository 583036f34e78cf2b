// Rotary position embeddings (RoPE) in Hugging Face Llama's layout: the head dimension is
// split in two halves that rotate together (rotate_half), not interleaved pairs.
#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {}
  // x [batch, heads, seq, head_dim] rotated by position 0..seq-1, or by `position_ids`
  // [batch, seq] (each in [0, max(seq, positions))) when given: a KV cache's new tokens
  // (Note [KV cache]) sit at positions past their own count.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& position_ids = {}, int64_t positions = 0) const;

 private:
  int64_t head_dim_;
  double theta_;
  mutable at::Tensor cos_, sin_;  // [length, head_dim] fp32, grown to the longest asked for on the last device
};

}  // namespace megacpp::models
