#include "models/gpt/gpt_family.h"

#include <stdexcept>

#include "models/config_keys.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_model.h"
#include "models/registry.h"

namespace megacpp::models {

MEGACPP_REGISTER_MODEL_FAMILY(GptFamily);

// Megatron's defaults, dropout included.
std::vector<ModelFlag> GptFamily::flags() const {
  return {
      {"num-layers", "transformer layers", "2"},
      {"hidden-size", "hidden size", "64"},
      {"ffn-hidden-size", "MLP hidden size (default 4 x hidden)", "0"},
      {"num-attention-heads", "attention heads", "4"},
      {"max-position-embeddings", "maximum sequence length (default: seq length); gpt: rows of the position table", "0"},
      {"norm-epsilon", "epsilon of the norms", "1e-5"},
      {"openai-gelu", "GeLU's tanh approximation (OpenAI's GPT-2) instead of the exact, erf one", "", true},
      {"apply-layernorm-1p", "zero-centered norm weights: each norm scales by 1 + weight (Megatron's)", "", true},
      {"attention-dropout", "dropout probability on the attention probabilities", "0.1"},
      {"hidden-dropout", "dropout probability on the embeddings and on each residual branch", "0.1"},
  };
}

std::shared_ptr<const ModelConfig> GptFamily::config_from_flags(const ModelFlagValues& flags,
                                                                const ModelContext& context) const {
  auto c = std::make_shared<GptConfig>();
  c->vocab_size = context.vocab_size;
  c->num_layers = flags.integer("num-layers");
  c->hidden_size = flags.integer("hidden-size");
  c->ffn_hidden_size = flags.integer("ffn-hidden-size");
  c->num_attention_heads = flags.integer("num-attention-heads");
  c->max_position_embeddings = flags.integer("max-position-embeddings");
  if (c->max_position_embeddings == 0) c->max_position_embeddings = context.seq_length;
  c->norm_epsilon = flags.number("norm-epsilon");
  c->openai_gelu = flags.enabled("openai-gelu");
  c->apply_layernorm_1p = flags.enabled("apply-layernorm-1p");
  c->attention_dropout = flags.number("attention-dropout");
  c->hidden_dropout = flags.number("hidden-dropout");
  c->validate();
  if (c->max_position_embeddings < context.seq_length) {
    throw std::invalid_argument("--max-position-embeddings (" + std::to_string(c->max_position_embeddings) +
                                ") must be >= --seq-length (" + std::to_string(context.seq_length) +
                                "): the position table has a row per position");
  }
  return c;
}

std::shared_ptr<const ModelConfig> GptFamily::config_from_args(const nlohmann::json& args, const std::string& where) const {
  const ConfigKeys keys(args, where + " args");
  auto c = std::make_shared<GptConfig>();
  c->num_layers = keys.positive("num_layers");
  c->hidden_size = keys.positive("hidden_size");
  c->ffn_hidden_size = keys.positive("ffn_hidden_size");
  c->num_attention_heads = keys.positive("num_attention_heads");
  c->max_position_embeddings = keys.positive("max_position_embeddings");
  c->norm_epsilon = keys.number("norm_epsilon");
  c->openai_gelu = keys.flag("openai_gelu");
  c->apply_layernorm_1p = keys.flag("apply_layernorm_1p");
  c->attention_dropout = keys.number("attention_dropout");
  c->hidden_dropout = keys.number("hidden_dropout");
  c->vocab_size = keys.positive("padded_vocab_size");
  c->validate();
  return c;
}

std::shared_ptr<LanguageModel> GptFamily::build(const ModelConfig& config, const at::TensorOptions& options) const {
  return std::make_shared<GptModel>(config_as<GptConfig>(config), options);
}

}  // namespace megacpp::models
