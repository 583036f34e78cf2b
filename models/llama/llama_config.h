// The shape of a Llama/Qwen2/Qwen3-style decoder (Megatron's flag names in comments).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_family.h"

namespace megacpp::models {

struct LlamaConfig : ModelConfig {
  int64_t vocab_size = 256;               // the tokenizer's, padded (--make-vocab-size-divisible-by)
  int64_t hidden_size = 64;               // --hidden-size
  int64_t ffn_hidden_size = 0;            // --ffn-hidden-size (0: 4 * hidden_size)
  int64_t num_layers = 2;                 // --num-layers
  int64_t num_attention_heads = 4;        // --num-attention-heads
  int64_t num_query_groups = 0;           // --num-query-groups (0: = heads, i.e. MHA)
  int64_t kv_channels = 0;                // --kv-channels: head dimension (0: hidden / heads)
  bool qk_layernorm = false;              // --qk-layernorm: RMSNorm on each q and k head (Qwen3)
  bool add_qkv_bias = false;              // --add-qkv-bias: biases on q_proj, k_proj, v_proj (Qwen2)
  int64_t sliding_window = 0;             // --sliding-window: each query sees that many keys, itself included (Mistral); 0: all
  int64_t max_position_embeddings = 0;    // --max-position-embeddings
  double rotary_base = 10000.0;           // --rotary-base
  double norm_epsilon = 1e-5;             // --norm-epsilon
  bool tie_embeddings = true;             // false with --untie-embeddings-and-output-weights
  bool apply_layernorm_1p = false;        // --apply-layernorm-1p: every RMSNorm scales by 1 + weight
  // Mixture of experts (Qwen3-MoE; Megatron's MoE flags). 0 experts: every MLP is dense.
  int64_t num_experts = 0;                // --num-experts
  int64_t moe_router_topk = 2;            // --moe-router-topk: experts per token
  int64_t moe_ffn_hidden_size = 0;        // --moe-ffn-hidden-size: each expert's (0: --ffn-hidden-size)
  std::vector<int> moe_layer_pattern;     // --moe-layer-freq: 1 = MoE layer, 0 = dense; empty: all MoE
  bool moe_norm_topk_prob = true;         // false with --moe-router-pre-softmax
  double moe_aux_loss_coeff = 0.0;        // --moe-aux-loss-coeff: load-balancing loss coefficient
  // --moe-router-load-balancing-type: aux_loss, seq_aux_loss, transformers or none (Note
  // [Load-balancing loss]); a Hugging Face folder's model trains with transformers'.
  std::string moe_load_balancing_type = "aux_loss";

  int64_t head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int64_t kv_heads() const { return num_query_groups > 0 ? num_query_groups : num_attention_heads; }
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int64_t moe_ffn() const { return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn(); }
  // Every layer's kind as --moe-layer-freq's list, "[1,0,1]".
  std::string moe_layer_freq() const;
  // Whether layer `layer`'s MLP is a mixture of experts.
  bool is_moe_layer(int64_t layer) const {
    return num_experts > 0 && (moe_layer_pattern.empty() || moe_layer_pattern.at(static_cast<size_t>(layer)) != 0);
  }
  // How many MoE layers come before layer `layer` (with num_layers: how many there are).
  int64_t moe_layer_index(int64_t layer) const {
    int64_t index = 0;
    for (int64_t l = 0; l < layer; ++l) index += is_moe_layer(l) ? 1 : 0;
    return index;
  }
  // Throws std::invalid_argument naming the Megatron flag that is inconsistent.
  void validate() const;
  // Training FLOPs per token (forward + backward = 3x forward matmuls, plus attention).
  double flops_per_token(int64_t seq_length) const;

  std::string model_type() const override { return "llama"; }
  // num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups,
  // kv_channels, qk_layernorm, add_qkv_bias, (with a window) sliding_window, max_position_embeddings, rotary_base, norm_epsilon,
  // padded_vocab_size, untie_embeddings_and_output_weights, apply_layernorm_1p, and with experts
  // num_experts, moe_router_topk, moe_ffn_hidden_size, moe_layer_freq ("[1,0,...]"),
  // moe_router_pre_softmax, moe_aux_loss_coeff, moe_router_load_balancing_type.
  nlohmann::json to_args() const override;
  nlohmann::json dense_args() const;  // to_args without the MoE fields
  std::string to_flags() const override;
  // RoPE has no position table: --max-position-embeddings (by default the sequence length)
  // changes no weight, so a checkpoint may be resumed with another one; nor does the
  // load-balancing loss, a training choice.
  bool checkpoint_must_match(const std::string& field) const override {
    return field != "max_position_embeddings" && field != "moe_aux_loss_coeff" && field != "moe_router_load_balancing_type";
  }
};

// Megatron's --moe-layer-freq: N (every N-th layer from the first, as Megatron counts) or a
// list "[1,0,1,1]" of one 0/1 per layer. Throws std::invalid_argument naming the flag.
std::vector<int> parse_moe_layer_freq(const std::string& text, int64_t num_layers);
// The list form of a pattern, "[1,0,1]".
std::string moe_layer_freq_text(const std::vector<int>& pattern);

// Equal when both describe the same model: the 0 defaults are compared resolved (an explicit
// --num-query-groups equal to the heads is the same model as 0).
bool operator==(const LlamaConfig& a, const LlamaConfig& b);
inline bool operator!=(const LlamaConfig& a, const LlamaConfig& b) { return !(a == b); }

}  // namespace megacpp::models
