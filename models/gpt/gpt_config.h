// The shape of Megatron's GPT model as pretrain_gpt.py builds it by default: learned absolute
// position embeddings, LayerNorm, a GeLU MLP, biases on every linear layer, the output layer
// tied to the token embedding, and dropout (Megatron's flag names in comments).
#pragma once

#include <cstdint>
#include <string>

#include "models/model_family.h"

namespace megacpp::models {

struct GptConfig : ModelConfig {
  int64_t vocab_size = 256;             // the tokenizer's, padded (--make-vocab-size-divisible-by)
  int64_t hidden_size = 64;             // --hidden-size
  int64_t ffn_hidden_size = 0;          // --ffn-hidden-size (0: 4 * hidden_size)
  int64_t num_layers = 2;               // --num-layers
  int64_t num_attention_heads = 4;      // --num-attention-heads
  int64_t max_position_embeddings = 0;  // --max-position-embeddings: rows of the position table
  double norm_epsilon = 1e-5;           // --norm-epsilon
  bool openai_gelu = false;             // --openai-gelu: GeLU's tanh approximation, not erf
  bool apply_layernorm_1p = false;      // --apply-layernorm-1p: every LayerNorm scales by 1 + weight
  double attention_dropout = 0.1;       // --attention-dropout: on the attention probabilities
  double hidden_dropout = 0.1;          // --hidden-dropout: on the embeddings and each residual branch

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  // Throws std::invalid_argument naming the Megatron flag that is inconsistent.
  void validate() const;
  // Training FLOPs per token (forward + backward = 3x forward matmuls, plus attention).
  double flops_per_token(int64_t seq_length) const;

  std::string model_type() const override { return "gpt"; }
  // num_layers, hidden_size, ffn_hidden_size, num_attention_heads, max_position_embeddings,
  // norm_epsilon, openai_gelu, apply_layernorm_1p, attention_dropout, hidden_dropout,
  // padded_vocab_size.
  nlohmann::json to_args() const override;
  std::string to_flags() const override;
  // Dropout changes no weight: a checkpoint may be resumed with other rates.
  bool checkpoint_must_match(const std::string& field) const override {
    return field != "attention_dropout" && field != "hidden_dropout";
  }
};

}  // namespace megacpp::models
