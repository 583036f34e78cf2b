#pragma once

#include <memory>

#include "models/layers/core_attention.h"
#include "models/layers/linear.h"
#include "models/layers/rms_norm.h"
#include "models/layers/rotary.h"

namespace megacpp::models {

struct AttentionShape {
  int64_t hidden_size = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;        // may differ from hidden_size / heads (Qwen3)
  double rotary_base = 10000.0;
  bool qk_layernorm = false;   // RMSNorm over head_dim on every q and k head, before rotary
  double norm_epsilon = 1e-6;  // of those norms
  bool zero_centered_gamma = false;  // of those norms (--apply-layernorm-1p)
  bool qkv_bias = false;       // biases on q_proj, k_proj and v_proj (Qwen2), none on o_proj
  int64_t sliding_window = 0;  // each query sees this many keys up to itself (Mistral); 0: all
};

// Causal grouped-query self-attention with rotary embeddings: Hugging Face's LlamaAttention,
// MistralAttention with a sliding window, Qwen2Attention with qkv_bias, or Qwen3Attention with qk_layernorm (children q_norm, k_norm
// with weight [head_dim]); the softmax(q k^T) v itself is the child core_attention. Takes
// {hidden [batch, seq, hidden], position_ids?, documents?} (Note [Packed documents]).
class Attention : public parallel::Module {
 public:
  Attention(const AttentionShape& shape, const at::TensorOptions& options);

  int64_t heads() const { return heads_; }
  int64_t kv_heads() const { return kv_heads_; }

 protected:
  Tensors forward_tensors(const Tensors& inputs) override;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  RotaryEmbedding rotary_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;  // q [heads*head_dim, hidden], o [hidden, heads*head_dim]
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;                    // null without qk_layernorm
  std::shared_ptr<CoreAttention> core_attention_;
};

}  // namespace megacpp::models
