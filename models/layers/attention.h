#pragma once

#include <memory>

#include "models/layers/linear.h"
#include "models/layers/rotary.h"

namespace megacpp::models {

// Causal grouped-query self-attention with rotary embeddings (Hugging Face LlamaAttention).
class Attention : public parallel::Module {
 public:
  Attention(int64_t hidden_size, int64_t heads, int64_t kv_heads, double rotary_base,
            const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;  // [batch, seq, hidden]

 private:
  int64_t heads_, kv_heads_, head_dim_;
  RotaryEmbedding rotary_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

}  // namespace megacpp::models
