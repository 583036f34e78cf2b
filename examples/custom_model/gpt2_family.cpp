// The "gpt2" model family: flags, checkpoint args, Hugging Face GPT2LMHeadModel names and
// config.json (Note [Model families] in megacpp's models/model_family.h).
#include <regex>
#include <sstream>
#include <stdexcept>

#include <models/config_keys.h>
#include <models/registry.h>

#include "gpt2_model.h"

namespace gpt2 {
namespace {

using megacpp::models::ConfigKeys;
using megacpp::models::HfTensorName;
using megacpp::models::ModelConfig;
using megacpp::models::ModelFlag;

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// Hugging Face's Conv1D layers store [in, out]: every 2-D weight inside the blocks.
const std::regex& conv1d_weight() {
  static const std::regex pattern(R"(h\.[0-9]+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight)");
  return pattern;
}

const std::regex& weight_name() {
  static const std::regex pattern(
      R"(wte\.weight|wpe\.weight|ln_f\.(weight|bias)|)"
      R"(h\.(0|[1-9][0-9]*)\.(ln_1|ln_2|attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.(weight|bias))");
  return pattern;
}

class Gpt2Family : public megacpp::models::ModelFamily {
 public:
  std::string name() const override { return "gpt2"; }

  std::vector<ModelFlag> flags() const override {
    return {{"num-layers", "transformer layers", "2"},
            {"hidden-size", "hidden size", "64"},
            {"num-attention-heads", "attention heads", "4"},
            {"ffn-hidden-size", "MLP hidden size (default 4 x hidden)", "0"},
            {"max-position-embeddings", "learned positions (default: seq length)", "0"},
            {"norm-epsilon", "LayerNorm epsilon", "1e-5"}};
  }

  std::shared_ptr<const ModelConfig> config_from_flags(const megacpp::models::ModelFlagValues& flags,
                                                       const megacpp::models::ModelContext& context) const override {
    auto c = std::make_shared<Gpt2Config>();
    c->vocab_size = context.vocab_size;
    c->num_layers = flags.integer("num-layers");
    c->hidden_size = flags.integer("hidden-size");
    c->num_attention_heads = flags.integer("num-attention-heads");
    c->ffn_hidden_size = flags.integer("ffn-hidden-size");
    c->max_position_embeddings = flags.integer("max-position-embeddings");
    if (c->max_position_embeddings == 0) c->max_position_embeddings = context.seq_length;
    c->norm_epsilon = flags.number("norm-epsilon");
    c->validate();
    require(c->max_position_embeddings >= context.seq_length, "--max-position-embeddings must be >= --seq-length");
    return c;
  }

  std::shared_ptr<const ModelConfig> config_from_args(const nlohmann::json& args, const std::string& where) const override {
    const ConfigKeys keys(args, where + " args");
    auto c = std::make_shared<Gpt2Config>();
    c->vocab_size = keys.positive("padded_vocab_size");
    c->num_layers = keys.positive("num_layers");
    c->hidden_size = keys.positive("hidden_size");
    c->num_attention_heads = keys.positive("num_attention_heads");
    c->ffn_hidden_size = keys.positive("ffn_hidden_size");
    c->max_position_embeddings = keys.positive("max_position_embeddings");
    c->norm_epsilon = keys.number("norm_epsilon");
    c->validate();
    return c;
  }

  std::shared_ptr<megacpp::models::LanguageModel> build(const ModelConfig& config,
                                                        const at::TensorOptions& options) const override {
    return std::make_shared<Gpt2Model>(config_as<Gpt2Config>(config), options);
  }

  std::vector<std::string> hf_model_types() const override { return {"gpt2"}; }

  nlohmann::json to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const override {
    const auto& c = config_as<Gpt2Config>(config);
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", c.vocab_size},
            {"n_positions", c.max_position_embeddings},
            {"n_embd", c.hidden_size},
            {"n_layer", c.num_layers},
            {"n_head", c.num_attention_heads},
            {"n_inner", c.ffn()},
            {"activation_function", "gelu_new"},
            {"layer_norm_epsilon", c.norm_epsilon},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"scale_attn_weights", true},
            {"scale_attn_by_inverse_layer_idx", false},
            {"reorder_and_upcast_attn", false},
            {"tie_word_embeddings", true},
            {"torch_dtype", torch_dtype}};
  }

  std::shared_ptr<const ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& path) const override {
    const ConfigKeys keys(config, path);
    keys.refuse_unless("activation_function", "gelu_new", "the MLP uses GELU with the tanh approximation");
    keys.refuse_unless("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)");
    keys.refuse_unless("scale_attn_by_inverse_layer_idx", false, "scores are not scaled by the layer index");
    keys.refuse_unless("tie_word_embeddings", true, "the output layer is the token embedding");
    for (const char* dropout : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
      keys.refuse_unless(dropout, 0.0, "this model trains without dropout");
    }
    auto c = std::make_shared<Gpt2Config>();
    c->vocab_size = keys.positive("vocab_size");
    c->max_position_embeddings = keys.positive("n_positions", 1024);
    c->hidden_size = keys.positive("n_embd", 768);
    c->num_layers = keys.positive("n_layer", 12);
    c->num_attention_heads = keys.positive("n_head", 12);
    c->ffn_hidden_size = keys.positive("n_inner", 4 * c->hidden_size);
    c->norm_epsilon = keys.number("layer_norm_epsilon", 1e-5);
    try {
      c->validate();
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(path + ": describes a model this family cannot build: " + e.what());
    }
    return c;
  }

  HfTensorName to_hf_tensor(const ModelConfig&, const std::string& fqn) const override {
    require(std::regex_match(fqn, weight_name()), "'" + fqn + "' is not a weight of a GPT-2 model");
    return {"transformer." + fqn, std::regex_match(fqn, conv1d_weight())};
  }

  std::optional<std::string> from_hf_tensor(const ModelConfig&, const std::string& hf_name) const override {
    // The tied output layer, and the causal-mask buffers older saves keep, hold no weight.
    if (hf_name == "lm_head.weight" || std::regex_match(hf_name, std::regex(R"(transformer\.h\.[0-9]+\.attn\.(bias|masked_bias))"))) {
      return std::nullopt;
    }
    const std::string prefix = "transformer.";
    const std::string fqn = hf_name.rfind(prefix, 0) == 0 ? hf_name.substr(prefix.size()) : "";
    require(std::regex_match(fqn, weight_name()), "'" + hf_name + "' is not a weight of a GPT-2 model");
    return fqn;
  }
};

}  // namespace

void Gpt2Config::validate() const {
  require(vocab_size > 0, "the vocabulary must be positive");
  require(hidden_size > 0, "--hidden-size must be positive");
  require(num_layers > 0, "--num-layers must be positive");
  require(num_attention_heads > 0 && hidden_size % num_attention_heads == 0,
          "--hidden-size must be divisible by --num-attention-heads");
  require(ffn_hidden_size >= 0, "--ffn-hidden-size must be >= 0 (0: 4 x --hidden-size)");
  require(max_position_embeddings > 0, "--max-position-embeddings must be positive");
  require(norm_epsilon > 0, "--norm-epsilon must be positive");
}

nlohmann::json Gpt2Config::to_args() const {
  return {{"num_layers", num_layers},       {"hidden_size", hidden_size},
          {"num_attention_heads", num_attention_heads}, {"ffn_hidden_size", ffn()},
          {"max_position_embeddings", max_position_embeddings}, {"norm_epsilon", norm_epsilon},
          {"padded_vocab_size", vocab_size}};
}

std::string Gpt2Config::to_flags() const {
  std::ostringstream flags;
  flags << "--num-layers " << num_layers << " --hidden-size " << hidden_size << " --num-attention-heads "
        << num_attention_heads << " --ffn-hidden-size " << ffn() << " --max-position-embeddings "
        << max_position_embeddings << " --norm-epsilon " << norm_epsilon;
  return flags.str();
}

}  // namespace gpt2

// Registered when this code is loaded: linked into gpt2-train, or loaded by
// megacpp-train --model-library libgpt2_family.so.
using gpt2::Gpt2Family;
MEGACPP_REGISTER_MODEL_FAMILY(Gpt2Family);
