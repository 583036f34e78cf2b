// The tiny Llama / Qwen3 shapes the Hugging Face tests share.
#pragma once

#include "models/llama/llama_config.h"

namespace megacpp::testing {

// GQA (4 heads, 2 query groups); Qwen3 adds q/k norms and a head dimension of 12, unlike
// hidden / heads = 8, so q_proj is [48, 32] and o_proj [32, 48].
inline models::LlamaConfig tiny_llama(bool tied, bool qwen3) {
  models::LlamaConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.ffn_hidden_size = 40;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  c.num_query_groups = 2;
  c.max_position_embeddings = 16;
  c.rotary_base = 500.0;
  c.norm_epsilon = 1e-6;
  c.tie_embeddings = tied;
  c.qk_layernorm = qwen3;
  if (qwen3) c.kv_channels = 12;
  return c;
}

}  // namespace megacpp::testing
