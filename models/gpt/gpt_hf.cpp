// The gpt family as Hugging Face's GPT2LMHeadModel: config.json and weight names. The module
// tree already has GPT-2's names under "transformer."; GPT-2's Conv1D layers (every 2-D weight
// inside the blocks) store [in, out], the transpose of a Linear's.
#include <regex>
#include <stdexcept>

#include "models/config_keys.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_family.h"

namespace megacpp::models {
namespace {

using nlohmann::json;

const char* const kPrefix = "transformer.";

// group 1: the block-relative module, group 2: weight or bias.
const std::regex& parameter_name() {
  static const std::regex pattern(
      R"((?:wte|wpe)\.weight|ln_f\.(?:weight|bias)|)"
      R"(h\.(?:0|[1-9][0-9]*)\.(ln_1|ln_2|attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.(weight|bias))");
  return pattern;
}

std::smatch parse(const std::string& fqn, const std::string& shown) {
  std::smatch m;
  if (!std::regex_match(fqn, m, parameter_name())) {
    throw std::invalid_argument("'" + shown + "' is not a weight of a GPT-2 model (expected [" + kPrefix +
                                "]{wte,wpe}.weight, ln_f.{weight,bias} or h.N.<module>.{weight,bias})");
  }
  return m;
}

// GPT-2 has one dropout after the embeddings (embd_pdrop) and one per residual branch
// (resid_pdrop); Megatron's --hidden-dropout is both.
double hidden_dropout(const ConfigKeys& keys) {
  const double resid = keys.number("resid_pdrop", 0.1), embd = keys.number("embd_pdrop", 0.1);
  if (resid != embd) {
    keys.fail("embd_pdrop", json(embd).dump() + " differs from resid_pdrop " + json(resid).dump() +
                                ": megacpp's --hidden-dropout is both");
  }
  return resid;
}

}  // namespace

json GptFamily::to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const {
  const auto& c = config_as<GptConfig>(config);
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.max_position_embeddings},
          {"n_embd", c.hidden_size},
          {"n_layer", c.num_layers},
          {"n_head", c.num_attention_heads},
          {"n_inner", c.ffn()},
          {"activation_function", c.openai_gelu ? "gelu_new" : "gelu"},
          {"layer_norm_epsilon", c.norm_epsilon},
          {"resid_pdrop", c.hidden_dropout},
          {"embd_pdrop", c.hidden_dropout},
          {"attn_pdrop", c.attention_dropout},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"torch_dtype", torch_dtype}};
}

std::shared_ptr<const ModelConfig> GptFamily::from_hf_config(const json& config, const std::string& path) const {
  if (!config.is_object()) throw std::invalid_argument(path + ": expected a JSON object");
  const ConfigKeys keys(config, path);
  keys.refuse_unless("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)");
  keys.refuse_unless("scale_attn_by_inverse_layer_idx", false, "scores are not scaled by the layer index");
  keys.refuse_unless("tie_word_embeddings", true, "the output layer is the token embedding");
  auto c = std::make_shared<GptConfig>();
  const json* activation = keys.get("activation_function");
  const std::string act = activation && activation->is_string() ? activation->get<std::string>() : "gelu_new";
  if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh") {
    keys.fail("activation_function", json(act).dump() + " is not supported: only gelu (exact) and gelu_new / "
                                                         "gelu_pytorch_tanh (tanh approximation)");
  }
  c->openai_gelu = act != "gelu";
  c->vocab_size = keys.positive("vocab_size");
  c->max_position_embeddings = keys.positive("n_positions", 1024);
  c->hidden_size = keys.positive("n_embd", 768);
  c->num_layers = keys.positive("n_layer", 12);
  c->num_attention_heads = keys.positive("n_head", 12);
  c->ffn_hidden_size = keys.positive("n_inner", 4 * c->hidden_size);
  c->norm_epsilon = keys.number("layer_norm_epsilon", 1e-5);
  c->hidden_dropout = hidden_dropout(keys);
  c->attention_dropout = keys.number("attn_pdrop", 0.1);
  try {
    c->validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": describes a model megacpp cannot build: " + e.what());
  }
  return c;
}

HfTensorName GptFamily::to_hf_tensor(const ModelConfig& config, const std::string& fqn) const {
  const std::smatch m = parse(fqn, fqn);
  const std::string module = m[1], kind = m[2];
  HfTensorName hf{kPrefix + fqn};
  hf.transposed = kind == "weight" && module.find('.') != std::string::npos;  // attn.* and mlp.*: Conv1D
  const bool norm_weight = fqn == "ln_f.weight" || (kind == "weight" && (module == "ln_1" || module == "ln_2"));
  if (norm_weight && config_as<GptConfig>(config).apply_layernorm_1p) hf.offset = 1.0;
  return hf;
}

std::optional<std::string> GptFamily::from_hf_tensor(const ModelConfig&, const std::string& hf_name) const {
  // The tied output layer, and the causal-mask buffers older saves keep, hold no weight.
  static const std::regex mask_buffer(R"((transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias))");
  if (hf_name == "lm_head.weight" || std::regex_match(hf_name, mask_buffer)) return std::nullopt;
  // GPT2LMHeadModel.save_pretrained writes "transformer.wte.weight"; the original gpt2 files
  // (a GPT2Model's state) have no prefix.
  const size_t prefix = std::string(kPrefix).size();
  const std::string fqn = hf_name.rfind(kPrefix, 0) == 0 ? hf_name.substr(prefix) : hf_name;
  parse(fqn, hf_name);
  return fqn;
}

}  // namespace megacpp::models
