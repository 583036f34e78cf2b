#include "models/llama/llama_config.h"

#include <sstream>
#include <stdexcept>

namespace megacpp::models {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

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
}

double LlamaConfig::flops_per_token(int64_t seq_length) const {
  const double h = static_cast<double>(hidden_size), d = static_cast<double>(head_dim());
  // q/k RMSNorm (--qk-layernorm) is elementwise: no matmul FLOPs.
  const double attention_proj = 2.0 * h * (num_attention_heads * d) * 2 + 2.0 * h * (kv_heads() * d) * 2;
  const double mlp = 2.0 * 3 * h * ffn();
  const double scores = 2.0 * 2 * seq_length * num_attention_heads * d;  // QK^T and PV
  const double logits = 2.0 * h * vocab_size;
  return 3.0 * (num_layers * (attention_proj + mlp + scores) + logits);
}

nlohmann::json LlamaConfig::to_args() const {
  return {{"num_layers", num_layers},
          {"hidden_size", hidden_size},
          {"ffn_hidden_size", ffn()},
          {"num_attention_heads", num_attention_heads},
          {"num_query_groups", kv_heads()},
          {"kv_channels", head_dim()},
          {"qk_layernorm", qk_layernorm},
          {"max_position_embeddings", max_position_embeddings},
          {"rotary_base", rotary_base},
          {"norm_epsilon", norm_epsilon},
          {"padded_vocab_size", vocab_size},
          {"untie_embeddings_and_output_weights", !tie_embeddings},
          {"apply_layernorm_1p", apply_layernorm_1p}};
}

std::string LlamaConfig::to_flags() const {
  std::ostringstream flags;
  flags << "--num-layers " << num_layers << " --hidden-size " << hidden_size << " --ffn-hidden-size " << ffn()
        << " --num-attention-heads " << num_attention_heads << " --num-query-groups " << kv_heads() << " --kv-channels "
        << head_dim() << " --max-position-embeddings " << max_position_embeddings << " --rotary-base " << rotary_base
        << " --norm-epsilon " << norm_epsilon << (qk_layernorm ? " --qk-layernorm" : "")
        << (tie_embeddings ? "" : " --untie-embeddings-and-output-weights")
        << (apply_layernorm_1p ? " --apply-layernorm-1p" : "");
  return flags.str();
}

bool operator==(const LlamaConfig& a, const LlamaConfig& b) {
  return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size && a.ffn() == b.ffn() &&
         a.num_layers == b.num_layers && a.num_attention_heads == b.num_attention_heads &&
         a.kv_heads() == b.kv_heads() && a.head_dim() == b.head_dim() && a.qk_layernorm == b.qk_layernorm &&
         a.max_position_embeddings == b.max_position_embeddings && a.rotary_base == b.rotary_base &&
         a.norm_epsilon == b.norm_epsilon && a.tie_embeddings == b.tie_embeddings &&
         a.apply_layernorm_1p == b.apply_layernorm_1p;
}

}  // namespace megacpp::models
