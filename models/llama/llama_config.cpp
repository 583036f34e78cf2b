#include "models/llama/llama_config.h"

#include <sstream>
#include <stdexcept>

#include "megacpp/errors.h"
#include "models/layers/load_balancing_loss.h"

namespace megacpp::models {

void LlamaConfig::validate() const {
  require(vocab_size > 0, "--vocab-size must be positive");
  require(hidden_size > 0, "--hidden-size must be positive");
  require(num_layers > 0, "--num-layers must be positive");
  require(num_attention_heads > 0, "--num-attention-heads must be positive");
  require(kv_channels >= 0, "--kv-channels must be >= 0 (0: --hidden-size / --num-attention-heads)");
  require(kv_channels > 0 || hidden_size % num_attention_heads == 0,
          "--hidden-size (" + std::to_string(hidden_size) + ") must be divisible by --num-attention-heads (" +
              std::to_string(num_attention_heads) + "), or give the head dimension with --kv-channels");
  require(head_dim() % 2 == 0, "the head dimension (" + std::to_string(head_dim()) +
                                   ", --kv-channels or --hidden-size / --num-attention-heads) must be even for "
                                   "rotary embeddings");
  require(kv_heads() > 0 && num_attention_heads % kv_heads() == 0,
          "--num-attention-heads (" + std::to_string(num_attention_heads) +
              ") must be divisible by --num-query-groups (" + std::to_string(kv_heads()) + ")");
  require(ffn_hidden_size >= 0, "--ffn-hidden-size must be >= 0 (0: 4 x --hidden-size)");
  require(num_query_groups >= 0, "--num-query-groups must be >= 0 (0: one per attention head)");
  require(norm_epsilon > 0, "--norm-epsilon must be positive");
  require(rotary_base > 0, "--rotary-base must be positive");
  require(sliding_window >= 0, "--sliding-window must be >= 0 (0: no window)");
  require(num_experts >= 0, "--num-experts must be >= 0 (0: dense MLPs)");
  if (num_experts == 0) return;
  require(moe_router_topk >= 1 && moe_router_topk <= num_experts,
          "--moe-router-topk (" + std::to_string(moe_router_topk) + ") must be in [1, --num-experts (" +
              std::to_string(num_experts) + ")]");
  require(moe_aux_loss_coeff >= 0.0, "--moe-aux-loss-coeff must be >= 0");
  if (moe_load_balancing_type == "none") {
    require(moe_aux_loss_coeff == 0.0, "--moe-aux-loss-coeff " + std::to_string(moe_aux_loss_coeff) +
                                           " scales no loss with --moe-router-load-balancing-type none");
  } else {
    balancing_loss_named(moe_load_balancing_type);  // throws naming the flag
  }
  require(moe_ffn_hidden_size >= 0, "--moe-ffn-hidden-size must be >= 0 (0: --ffn-hidden-size)");
  require(moe_layer_pattern.empty() || static_cast<int64_t>(moe_layer_pattern.size()) == num_layers,
          "--moe-layer-freq: the list has " + std::to_string(moe_layer_pattern.size()) + " entries for " +
              std::to_string(num_layers) + " layers (--num-layers)");
}

std::vector<int> parse_moe_layer_freq(const std::string& text, int64_t num_layers) {
  const std::string flag = "--moe-layer-freq '" + text + "': ";
  std::vector<int> pattern;
  if (!text.empty() && text.front() == '[' && text.back() == ']') {
    std::stringstream items(text.substr(1, text.size() - 2));
    for (std::string item; std::getline(items, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      require(item == "0" || item == "1", flag + "each entry must be 0 (dense) or 1 (MoE)");
      pattern.push_back(item == "1");
    }
    require(static_cast<int64_t>(pattern.size()) == num_layers,
            flag + "has " + std::to_string(pattern.size()) + " entries for " + std::to_string(num_layers) + " layers");
    return pattern;
  }
  size_t used = 0;
  int64_t every = 0;
  try {
    every = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == text.size() && every != 0, flag + "expected a non-zero integer or a list like [1,0,1,1]");
  // Megatron's and MindSpeed-LLM's rule is Python's `layer % every == 0`: -N as N (MindSpeed-LLM's
  // scripts write -1, every layer).
  for (int64_t layer = 0; layer < num_layers; ++layer) pattern.push_back(layer % every == 0);
  return pattern;
}

std::string moe_layer_freq_text(const std::vector<int>& pattern) {
  std::string text = "[";
  for (size_t i = 0; i < pattern.size(); ++i) text += (i ? "," : "") + std::to_string(pattern[i]);
  return text + "]";
}

double LlamaConfig::flops_per_token(int64_t seq_length) const {
  const double h = static_cast<double>(hidden_size), d = static_cast<double>(head_dim());
  // q/k RMSNorm (--qk-layernorm) is elementwise: no matmul FLOPs.
  const double attention_proj = 2.0 * h * (num_attention_heads * d) * 2 + 2.0 * h * (kv_heads() * d) * 2;
  const double scores = 2.0 * 2 * seq_length * num_attention_heads * d;  // QK^T and PV
  const double logits = 2.0 * h * vocab_size;
  double layers = 0;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    // A MoE layer: the router, and top-k experts per token.
    const double mlp = is_moe_layer(layer) ? 2.0 * h * num_experts + moe_router_topk * 2.0 * 3 * h * moe_ffn()
                                           : 2.0 * 3 * h * ffn();
    layers += attention_proj + mlp + scores;
  }
  return 3.0 * (layers + logits);
}

nlohmann::json LlamaConfig::dense_args() const {
  nlohmann::json args = {{"num_layers", num_layers},
          {"hidden_size", hidden_size},
          {"ffn_hidden_size", ffn()},
          {"num_attention_heads", num_attention_heads},
          {"num_query_groups", kv_heads()},
          {"kv_channels", head_dim()},
          {"qk_layernorm", qk_layernorm},
          {"add_qkv_bias", add_qkv_bias},
          {"max_position_embeddings", max_position_embeddings},
          {"rotary_base", rotary_base},
          {"norm_epsilon", norm_epsilon},
          {"padded_vocab_size", vocab_size},
          {"untie_embeddings_and_output_weights", !tie_embeddings},
          {"apply_layernorm_1p", apply_layernorm_1p}};
  if (sliding_window > 0) args["sliding_window"] = sliding_window;  // absent: none (as before megacpp had it)
  return args;
}

std::string LlamaConfig::moe_layer_freq() const {
  std::vector<int> pattern;
  for (int64_t layer = 0; layer < num_layers; ++layer) pattern.push_back(is_moe_layer(layer));
  return moe_layer_freq_text(pattern);
}

nlohmann::json LlamaConfig::to_args() const {
  nlohmann::json args = dense_args();
  if (num_experts == 0) return args;
  args["num_experts"] = num_experts;
  args["moe_router_topk"] = moe_router_topk;
  args["moe_ffn_hidden_size"] = moe_ffn();
  args["moe_layer_freq"] = moe_layer_freq();
  args["moe_router_pre_softmax"] = !moe_norm_topk_prob;
  args["moe_aux_loss_coeff"] = moe_aux_loss_coeff;
  args["moe_router_load_balancing_type"] = moe_load_balancing_type;
  return args;
}

std::string LlamaConfig::to_flags() const {
  std::ostringstream flags;
  flags << "--num-layers " << num_layers << " --hidden-size " << hidden_size << " --ffn-hidden-size " << ffn()
        << " --num-attention-heads " << num_attention_heads << " --num-query-groups " << kv_heads() << " --kv-channels "
        << head_dim() << " --max-position-embeddings " << max_position_embeddings << " --rotary-base " << rotary_base
        << " --norm-epsilon " << norm_epsilon << (qk_layernorm ? " --qk-layernorm" : "") << (add_qkv_bias ? " --add-qkv-bias" : "")
        << (sliding_window > 0 ? " --sliding-window " + std::to_string(sliding_window) : std::string())
        << (tie_embeddings ? "" : " --untie-embeddings-and-output-weights")
        << (apply_layernorm_1p ? " --apply-layernorm-1p" : "");
  if (num_experts > 0) {
    flags << " --num-experts " << num_experts << " --moe-router-topk " << moe_router_topk << " --moe-ffn-hidden-size "
          << moe_ffn() << " --moe-layer-freq " << moe_layer_freq()
          << (moe_norm_topk_prob ? "" : " --moe-router-pre-softmax");
    if (moe_aux_loss_coeff != 0.0) flags << " --moe-aux-loss-coeff " << moe_aux_loss_coeff;
    if (moe_load_balancing_type != "aux_loss") flags << " --moe-router-load-balancing-type " << moe_load_balancing_type;
  }
  return flags.str();
}

bool operator==(const LlamaConfig& a, const LlamaConfig& b) {
  return a.to_args() == b.to_args();  // every field, the 0 defaults resolved
}

}  // namespace megacpp::models
