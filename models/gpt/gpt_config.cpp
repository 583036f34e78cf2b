#include "models/gpt/gpt_config.h"

#include <sstream>
#include <stdexcept>

#include "megacpp/errors.h"

namespace megacpp::models {
namespace {

bool probability(double p) { return p >= 0.0 && p < 1.0; }

}  // namespace

void GptConfig::validate() const {
  require(vocab_size > 0, "--vocab-size must be positive");
  require(hidden_size > 0, "--hidden-size must be positive");
  require(num_layers > 0, "--num-layers must be positive");
  require(num_attention_heads > 0 && hidden_size % num_attention_heads == 0,
          "--hidden-size (" + std::to_string(hidden_size) + ") must be divisible by --num-attention-heads (" +
              std::to_string(num_attention_heads) + ")");
  require(ffn_hidden_size >= 0, "--ffn-hidden-size must be >= 0 (0: 4 x --hidden-size)");
  require(max_position_embeddings > 0, "--max-position-embeddings must be positive");
  require(norm_epsilon > 0, "--norm-epsilon must be positive");
  require(probability(attention_dropout), "--attention-dropout must be in [0, 1)");
  require(probability(hidden_dropout), "--hidden-dropout must be in [0, 1)");
}

double GptConfig::flops_per_token(int64_t seq_length) const {
  const double h = static_cast<double>(hidden_size);
  const double projections = 2.0 * h * h * 4;  // q, k, v and the output projection
  const double mlp = 2.0 * 2 * h * ffn();
  const double scores = 2.0 * 2 * seq_length * h;  // QK^T and PV
  const double logits = 2.0 * h * vocab_size;
  return 3.0 * (num_layers * (projections + mlp + scores) + logits);
}

nlohmann::json GptConfig::to_args() const {
  return {{"num_layers", num_layers},
          {"hidden_size", hidden_size},
          {"ffn_hidden_size", ffn()},
          {"num_attention_heads", num_attention_heads},
          {"max_position_embeddings", max_position_embeddings},
          {"norm_epsilon", norm_epsilon},
          {"openai_gelu", openai_gelu},
          {"apply_layernorm_1p", apply_layernorm_1p},
          {"attention_dropout", attention_dropout},
          {"hidden_dropout", hidden_dropout},
          {"padded_vocab_size", vocab_size}};
}

std::string GptConfig::to_flags() const {
  std::ostringstream flags;
  flags << "--num-layers " << num_layers << " --hidden-size " << hidden_size << " --ffn-hidden-size "
        << ffn() << " --num-attention-heads " << num_attention_heads << " --max-position-embeddings "
        << max_position_embeddings << " --norm-epsilon " << norm_epsilon << " --attention-dropout "
        << attention_dropout << " --hidden-dropout " << hidden_dropout << (openai_gelu ? " --openai-gelu" : "")
        << (apply_layernorm_1p ? " --apply-layernorm-1p" : "");
  return flags.str();
}

}  // namespace megacpp::models
