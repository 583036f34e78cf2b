// The shape of a GPT-2 style model, with Megatron's flag names.
#pragma once

#include <cstdint>
#include <string>

#include <models/model_family.h>

namespace gpt2 {

struct Gpt2Config : megacpp::models::ModelConfig {
  int64_t vocab_size = 256;              // the tokenizer's, padded
  int64_t hidden_size = 64;              // --hidden-size (n_embd)
  int64_t num_layers = 2;                // --num-layers (n_layer)
  int64_t num_attention_heads = 4;       // --num-attention-heads (n_head)
  int64_t ffn_hidden_size = 0;           // --ffn-hidden-size (n_inner; 0: 4 x hidden)
  int64_t max_position_embeddings = 0;   // --max-position-embeddings (n_positions)
  double norm_epsilon = 1e-5;            // --norm-epsilon (layer_norm_epsilon)

  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Throws std::invalid_argument naming the flag.
  void validate() const;

  std::string model_type() const override { return "gpt2"; }
  nlohmann::json to_args() const override;
  std::string to_flags() const override;
};

}  // namespace gpt2
