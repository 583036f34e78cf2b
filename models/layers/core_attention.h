#pragma once

#include <cstdint>

#include "parallel/module.h"

namespace megacpp::models {

// softmax(q k^T / sqrt(d) + causal mask) v over q, k, v [batch, heads, seq, head_dim], with
// dropout on the probabilities while training: what Megatron calls a layer's core attention.
// Given a fourth tensor, the document of each token [batch, seq] (Note [Packed documents] in
// models/language_model.h), a token sees only the earlier tokens of its own document. With a
// sliding window of w > 0 (Mistral's), query i sees keys j with i - w < j <= i (transformers'
// sliding-window mask), counted in the sequence.
// A module of its own, with no parameters, so that Megatron's selective recompute
// (--recompute-granularity selective) recomputes exactly this part of each layer.
class CoreAttention : public parallel::Module {
 public:
  explicit CoreAttention(double dropout = 0.0, int64_t sliding_window = 0);
  int64_t sliding_window() const { return sliding_window_; }

 protected:
  Tensors forward_tensors(const Tensors& qkv) override;  // {q, k, v, documents?} -> {[batch, heads, seq, head_dim]}

 private:
  double dropout_;
  int64_t sliding_window_;  // 0: none
};

}  // namespace megacpp::models
