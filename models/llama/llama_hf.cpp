#include "models/llama/llama_hf.h"

#include "models/config_keys.h"

#include <algorithm>
#include <regex>
#include <stdexcept>

namespace megacpp::models {
namespace {

using nlohmann::json;

struct TransformersShape {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads;  // kv_heads 0: = heads
};

// The transformers models megacpp's llama family computes, and what each adds to Llama's
// decoder: q/k RMSNorm (Qwen3, Qwen3-MoE), q/k/v biases (Qwen2), experts (Qwen3-MoE), a sliding
// window (Mistral; without one, a Mistral model is a Llama model and is exported as one).
struct HfVariant {
  const char* model_type;
  const char* architecture;
  bool qk_layernorm, qkv_bias, moe, sliding_window;
  TransformersShape defaults;       // transformers' config defaults (a LLaVA text_config may keep
  int64_t max_position_embeddings;  // only what differs from them)
  int64_t head_dim;                 // 0: hidden / heads when config.json has no head_dim
};

const HfVariant kVariants[] = {
    {"llama", "LlamaForCausalLM", false, false, false, false, {32000, 4096, 11008, 32, 32, 0}, 2048, 0},
    {"mistral", "MistralForCausalLM", false, false, false, true, {32000, 4096, 14336, 32, 32, 8}, 131072, 0},
    {"qwen2", "Qwen2ForCausalLM", false, true, false, false, {151936, 4096, 22016, 32, 32, 32}, 32768, 0},
    {"qwen3", "Qwen3ForCausalLM", true, false, false, false, {151936, 4096, 22016, 32, 32, 32}, 32768, 128},
    {"qwen3_moe", "Qwen3MoeForCausalLM", true, false, true, false, {151936, 2048, 6144, 24, 32, 4}, 32768, 0},
};

// The variant that writes `c`; refuses a combination no transformers model has.
const HfVariant& variant_of(const LlamaConfig& c) {
  const bool moe = c.num_experts > 0;
  if (c.add_qkv_bias && (c.qk_layernorm || moe)) {
    throw std::invalid_argument("--add-qkv-bias with --qk-layernorm or experts is no Hugging Face model (Qwen2 has "
                                "q/k/v biases, Qwen3 and Qwen3-MoE q/k norms)");
  }
  if (c.sliding_window > 0 && (c.qk_layernorm || c.add_qkv_bias || moe)) {
    throw std::invalid_argument("--sliding-window with --qk-layernorm, --add-qkv-bias or experts is no Hugging Face model "
                                "megacpp writes (a sliding window is exported as MistralForCausalLM)");
  }
  if (moe && !c.qk_layernorm) {
    throw std::invalid_argument("a mixture-of-experts model is exported as Qwen3MoeForCausalLM, which has --qk-layernorm; "
                                "this one has not");
  }
  for (const HfVariant& v : kVariants) {
    if (v.qk_layernorm == c.qk_layernorm && v.qkv_bias == c.add_qkv_bias && v.moe == moe &&
        v.sliding_window == (c.sliding_window > 0)) {
      return v;
    }
  }
  throw std::logic_error("no Hugging Face variant for this llama config");
}

const HfVariant& variant_named(const ConfigKeys& keys) {
  const json* type = keys.get("model_type");
  std::string known;
  for (const HfVariant& v : kVariants) {
    if (type && *type == v.model_type) return v;
    known += std::string(known.empty() ? "" : ", ") + "\"" + v.model_type + "\"";
  }
  keys.fail("model_type", (type ? type->dump() : "missing") + ": megacpp reads " + known);
}

// transformers' Qwen3MoeConfig: a layer is sparse unless listed in mlp_only_layers, when
// (layer + 1) % decoder_sparse_step == 0. megacpp writes step 1 and lists its dense layers.
void add_moe_keys(const LlamaConfig& c, json& j) {
  json dense = json::array();
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    if (!c.is_moe_layer(layer)) dense.push_back(layer);
  }
  j["num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.moe_router_topk;
  j["moe_intermediate_size"] = c.moe_ffn();
  j["norm_topk_prob"] = c.moe_norm_topk_prob;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = dense;
  // transformers adds the load-balancing loss (its own form) to the loss only with
  // output_router_logits; Megatron's forms have no key.
  j["router_aux_loss_coef"] = c.moe_aux_loss_coeff;
  j["output_router_logits"] = c.moe_aux_loss_coeff > 0.0 && c.moe_load_balancing_type == "transformers";
}

void read_moe_keys(const ConfigKeys& keys, LlamaConfig& c) {
  c.num_experts = keys.positive("num_experts", 128);
  c.moe_router_topk = keys.positive("num_experts_per_tok", 8);
  c.moe_ffn_hidden_size = keys.positive("moe_intermediate_size", 768);
  c.moe_norm_topk_prob = keys.flag("norm_topk_prob", false);
  // transformers trains with the load-balancing loss only when output_router_logits is set.
  c.moe_aux_loss_coeff = keys.flag("output_router_logits", false) ? keys.number("router_aux_loss_coef", 0.001) : 0.0;
  c.moe_load_balancing_type = "transformers";
  const int64_t step = keys.positive("decoder_sparse_step", 1);
  std::vector<int64_t> dense;
  if (const json* only = keys.get("mlp_only_layers")) {
    if (!only->is_array()) keys.fail("mlp_only_layers", "expected a list of layer indices, got " + only->dump());
    for (const json& layer : *only) {
      if (!layer.is_number_integer()) keys.fail("mlp_only_layers", "expected layer indices, got " + layer.dump());
      dense.push_back(layer.get<int64_t>());
    }
  }
  c.moe_layer_pattern.clear();
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const bool listed = std::find(dense.begin(), dense.end(), layer) != dense.end();
    c.moe_layer_pattern.push_back(!listed && (layer + 1) % step == 0);
  }
}

// transformers v5 writes rope_parameters {"rope_type": "default", "rope_theta": T} instead of
// rope_theta; only default RoPE computes what RotaryEmbedding does.
double rope_theta(const ConfigKeys& keys) {
  const json* params = keys.get("rope_parameters");
  if (!params) return keys.number("rope_theta", 10000.0);
  if (!params->is_object()) keys.fail("rope_parameters", "expected an object, got " + params->dump());
  double theta = keys.number("rope_theta", 10000.0);
  for (auto& [name, value] : params->items()) {
    if (name == "rope_theta" && value.is_number()) {
      theta = value.get<double>();
    } else if (!((name == "rope_type" || name == "type") && value == "default") &&
               !(name == "partial_rotary_factor" && value == 1.0)) {
      keys.fail("rope_parameters." + name, value.dump() + " is not supported (only default RoPE)");
    }
  }
  return theta;
}

// MistralConfig's sliding_window: null (none; Mistral 7B v0.2 on) or the keys each query sees
// (transformers' default 4096 when absent).
int64_t sliding_window(const json& config, const ConfigKeys& keys) {
  const auto window = config.find("sliding_window");
  if (window != config.end() && window->is_null()) return 0;
  return keys.positive("sliding_window", 4096);
}

void refuse_unsupported(const ConfigKeys& keys, const HfVariant& variant) {
  keys.refuse_unless("rope_scaling", json(), "only default RoPE (no scaling) is implemented");
  keys.refuse_unless("partial_rotary_factor", 1.0, "rotary embeddings cover the whole head");
  keys.refuse_unless("hidden_act", "silu", "the MLP is SwiGLU with silu");
  // Qwen2's attention has q/k/v biases whatever attention_bias says (its config has no such key).
  if (!variant.qkv_bias) keys.refuse_unless("attention_bias", false, "the attention projections have no bias");
  keys.refuse_unless("mlp_bias", false, "the MLP projections have no bias");
  // Qwen2/Qwen3 windows only some layers (max_window_layers); Mistral's window is read.
  keys.refuse_unless("use_sliding_window", false, "sliding-window attention in only some layers is not supported");
  keys.refuse_unless("attention_dropout", 0.0, "megacpp has no dropout");
  if (const json* types = keys.get("layer_types")) {
    if (!types->is_array()) keys.fail("layer_types", "expected a list, got " + types->dump());
    for (const json& t : *types) {
      if (t != "full_attention") keys.fail("layer_types", t.dump() + " is not supported: only full_attention");
    }
  }
}

// Weight names without the "model." prefix; a layer index has no leading zeros.
const std::regex& weight_name_pattern() {
  static const std::regex pattern(
      "embed_tokens\\.weight|norm\\.weight|lm_head\\.weight|"
      "layers\\.(0|[1-9][0-9]*)\\.(input_layernorm|post_attention_layernorm|"
      "self_attn\\.(q_proj|k_proj|v_proj|o_proj|q_norm|k_norm)|"
      "mlp\\.(gate_proj|up_proj|down_proj|gate|experts\\.(0|[1-9][0-9]*)\\.(gate_proj|up_proj|down_proj)))\\.weight|"
      "layers\\.(0|[1-9][0-9]*)\\.self_attn\\.(q_proj|k_proj|v_proj)\\.bias");
  return pattern;
}

[[noreturn]] void unknown_name(const std::string& name, const std::string& expected) {
  throw std::invalid_argument("'" + name + "' is not a weight of a Llama/Mistral/Qwen2/Qwen3 model (expected " + expected + ")");
}

}  // namespace

nlohmann::json llama_hf_config(const LlamaConfig& c, const std::string& torch_dtype) {
  if (torch_dtype != "float32" && torch_dtype != "bfloat16") {
    throw std::invalid_argument("torch_dtype '" + torch_dtype + "': expected float32 or bfloat16");
  }
  c.validate();
  if (c.max_position_embeddings <= 0) {
    throw std::invalid_argument("max_position_embeddings must be set (> 0) to write a Hugging Face config");
  }
  const HfVariant& variant = variant_of(c);
  const std::string type = variant.model_type;
  json j = {
      {"architectures", json::array({variant.architecture})},
      {"model_type", type},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.ffn()},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.kv_heads()},
      {"head_dim", c.head_dim()},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.norm_epsilon},
      {"rope_theta", c.rotary_base},
      {"rope_scaling", nullptr},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_dropout", 0.0},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  if (variant.moe) add_moe_keys(c, j);
  if (type == "mistral") {  // MistralConfig has no attention_bias
    j["sliding_window"] = c.sliding_window;
    return j;
  }
  if (type != "qwen2") j["attention_bias"] = false;  // Qwen2's q/k/v biases are not a config key
  if (type == "llama") {
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.num_layers;
  }
  return j;
}

LlamaConfig llama_config_from_hf(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw std::invalid_argument(path + ": expected a JSON object");
  const ConfigKeys keys(j, path);
  const HfVariant& variant = variant_named(keys);
  const std::string type = variant.model_type;
  if (const json* archs = keys.get("architectures")) {
    if (*archs != json::array({variant.architecture})) {
      keys.fail("architectures", archs->dump() + ": expected [\"" + variant.architecture + "\"] for model_type \"" + type + "\"");
    }
  }
  refuse_unsupported(keys, variant);

  const TransformersShape& d = variant.defaults;
  LlamaConfig c;
  c.qk_layernorm = variant.qk_layernorm;
  c.add_qkv_bias = variant.qkv_bias;
  c.hidden_size = keys.positive("hidden_size", d.hidden);
  c.ffn_hidden_size = keys.positive("intermediate_size", d.intermediate);
  c.num_layers = keys.positive("num_hidden_layers", d.layers);
  c.num_attention_heads = keys.positive("num_attention_heads", d.heads);
  c.num_query_groups = keys.positive("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : c.num_attention_heads);
  // Absent head_dim: Qwen3Config's default is 128; the other attentions use hidden / heads.
  c.kv_channels = keys.positive("head_dim", variant.head_dim > 0 ? variant.head_dim : c.hidden_size / c.num_attention_heads);
  c.vocab_size = keys.positive("vocab_size", d.vocab);
  c.max_position_embeddings = keys.positive("max_position_embeddings", variant.max_position_embeddings);
  c.norm_epsilon = keys.number("rms_norm_eps", 1e-6);
  c.rotary_base = rope_theta(keys);
  c.tie_embeddings = keys.flag("tie_word_embeddings", false);
  if (variant.moe) read_moe_keys(keys, c);
  if (variant.sliding_window) c.sliding_window = sliding_window(j, keys);
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": describes a model megacpp cannot build: " + e.what());
  }
  return c;
}

std::string llama_hf_name(const std::string& fqn) {
  if (!std::regex_match(fqn, weight_name_pattern())) {
    unknown_name(fqn, "embed_tokens.weight, norm.weight, lm_head.weight or layers.N.<module>.weight");
  }
  return fqn == "lm_head.weight" ? fqn : "model." + fqn;
}

std::string llama_name_from_hf(const std::string& hf_name) {
  if (hf_name == "lm_head.weight") return hf_name;
  const std::string prefix = "model.";
  const std::string fqn = hf_name.rfind(prefix, 0) == 0 ? hf_name.substr(prefix.size()) : "";
  if (fqn == "lm_head.weight" || !std::regex_match(fqn, weight_name_pattern())) {
    unknown_name(hf_name, "model.embed_tokens.weight, model.norm.weight, model.layers.N.<module>.weight or "
                          "lm_head.weight");
  }
  return fqn;
}

}  // namespace megacpp::models
