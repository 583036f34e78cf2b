#include "models/llama/llama_family.h"

#include <stdexcept>

#include "models/config_keys.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_model.h"
#include "models/registry.h"

namespace megacpp::models {

MEGACPP_REGISTER_MODEL_FAMILY(LlamaFamily);

namespace {

// Megatron's MoE flags (only read with --num-experts > 0). MindSpeed-LLM's
// --first-k-dense-replace K makes the first K layers dense whatever --moe-layer-freq says (K <= 0:
// none, as its scripts write -1).
void read_moe_flags(const ModelFlagValues& flags, LlamaConfig& c) {
  c.num_experts = flags.integer("num-experts");
  const int64_t first_dense = flags.integer("first-k-dense-replace");
  if (c.num_experts == 0) {
    if (flags.number("moe-aux-loss-coeff") != 0.0) throw std::invalid_argument("--moe-aux-loss-coeff needs --num-experts > 0");
    if (flags.given("moe-router-load-balancing-type")) {
      throw std::invalid_argument("--moe-router-load-balancing-type needs --num-experts > 0");
    }
    if (first_dense > 0) throw std::invalid_argument("--first-k-dense-replace needs --num-experts > 0 (every layer is dense)");
    return;
  }
  c.moe_router_topk = flags.integer("moe-router-topk");
  c.moe_ffn_hidden_size = flags.integer("moe-ffn-hidden-size");
  c.moe_layer_pattern = parse_moe_layer_freq(flags.text("moe-layer-freq"), flags.integer("num-layers"));
  if (first_dense > static_cast<int64_t>(c.moe_layer_pattern.size())) {
    throw std::invalid_argument("--first-k-dense-replace " + std::to_string(first_dense) + " is more than the " +
                                std::to_string(c.moe_layer_pattern.size()) + " layers (--num-layers)");
  }
  for (int64_t layer = 0; layer < first_dense; ++layer) c.moe_layer_pattern[static_cast<size_t>(layer)] = 0;
  c.moe_norm_topk_prob = !flags.enabled("moe-router-pre-softmax");
  c.moe_aux_loss_coeff = flags.number("moe-aux-loss-coeff");
  c.moe_load_balancing_type = flags.text("moe-router-load-balancing-type");
}

// The MoE fields of a checkpoint's args (absent: a dense model).
void read_moe_args(const ConfigKeys& keys, LlamaConfig& c) {
  const nlohmann::json* experts = keys.get("num_experts");
  if (!experts || *experts == 0) return;  // a dense model (Megatron writes null)
  c.num_experts = keys.positive("num_experts");
  c.moe_router_topk = keys.positive("moe_router_topk");
  c.moe_ffn_hidden_size = keys.positive("moe_ffn_hidden_size");
  // megacpp writes the list "[1,0,1]"; Megatron's args may hold the integer.
  const nlohmann::json* freq = keys.get("moe_layer_freq");
  if (!freq || !(freq->is_string() || freq->is_number_integer())) keys.fail("moe_layer_freq", "expected N or \"[1,0,1,...]\"");
  c.moe_layer_pattern = parse_moe_layer_freq(freq->is_string() ? freq->get<std::string>() : std::to_string(freq->get<int64_t>()),
                                             c.num_layers);
  c.moe_norm_topk_prob = !keys.flag("moe_router_pre_softmax", false);
  c.moe_aux_loss_coeff = keys.number("moe_aux_loss_coeff", 0.0);
  // Absent before megacpp had it, when it computed transformers' loss.
  if (const nlohmann::json* type = keys.get("moe_router_load_balancing_type")) {
    if (!type->is_string()) keys.fail("moe_router_load_balancing_type", "expected a string, got " + type->dump());
    c.moe_load_balancing_type = type->get<std::string>();
  } else {
    c.moe_load_balancing_type = "transformers";
  }
}

}  // namespace

std::vector<ModelFlag> LlamaFamily::flags() const {
  return {
      {"num-layers", "transformer layers", "2"},
      {"hidden-size", "hidden size", "64"},
      {"ffn-hidden-size", "MLP hidden size (default 4 x hidden)", "0"},
      {"num-attention-heads", "attention heads", "4"},
      {"num-query-groups", "key/value heads for grouped-query attention (default: heads)", "0"},
      {"kv-channels", "head dimension (default: hidden / heads)", "0"},
      {"qk-layernorm", "RMSNorm on each query and key head before rotary (Qwen3)", "", true},
      {"add-qkv-bias", "biases on the query, key and value projections (Qwen2 / Qwen2.5)", "", true},
      {"sliding-window", "each query attends to the N keys up to itself (Mistral's sliding window; 0: all before it)", "0"},
      {"max-position-embeddings", "maximum sequence length (default: seq length)", "0"},
      {"norm-epsilon", "epsilon of the norms", "1e-5"},
      {"rotary-base", "rotary embedding base", "10000"},
      {"untie-embeddings-and-output-weights", "separate output layer weights", "", true},
      {"apply-layernorm-1p", "zero-centered norm weights: each norm scales by 1 + weight (Megatron's)", "", true},
      {"attention-dropout", "dropout on the attention probabilities (llama: only 0)", "0"},
      {"hidden-dropout", "dropout on the residual branches (llama: only 0)", "0"},
      {"num-experts", "experts of each mixture-of-experts MLP (0: dense MLPs; Qwen3-MoE)", "0"},
      {"moe-router-topk", "experts each token is routed to", "2"},
      {"moe-ffn-hidden-size", "each expert's MLP hidden size (default: --ffn-hidden-size)", "0"},
      {"moe-layer-freq", "which layers are MoE: every N-th from the first (-N as N, -1 every layer), or a list [1,0,1,...]", "1"},
      {"first-k-dense-replace", "the first K layers dense, the rest as --moe-layer-freq says (MindSpeed-LLM's; <= 0: none)",
       "0"},
      {"moe-router-pre-softmax", "top-k of the softmax over all experts, not renormalized (default: renormalized)", "",
       true},
      {"moe-aux-loss-coeff", "load-balancing loss coefficient (0: logged only)", "0"},
      {"moe-router-load-balancing-type", "the load-balancing loss: aux_loss (Megatron's, per layer), seq_aux_loss (per "
       "sequence), transformers (transformers' over all layers) or none", "aux_loss"},
  };
}

std::shared_ptr<const ModelConfig> LlamaFamily::config_from_flags(const ModelFlagValues& flags,
                                                                  const ModelContext& context) const {
  auto c = std::make_shared<LlamaConfig>();
  c->vocab_size = context.vocab_size;
  c->num_layers = flags.integer("num-layers");
  c->hidden_size = flags.integer("hidden-size");
  c->ffn_hidden_size = flags.integer("ffn-hidden-size");
  c->num_attention_heads = flags.integer("num-attention-heads");
  c->num_query_groups = flags.integer("num-query-groups");
  c->kv_channels = flags.integer("kv-channels");
  c->qk_layernorm = flags.enabled("qk-layernorm");
  c->add_qkv_bias = flags.enabled("add-qkv-bias");
  c->sliding_window = flags.integer("sliding-window");
  c->max_position_embeddings = flags.integer("max-position-embeddings");
  if (c->max_position_embeddings == 0) c->max_position_embeddings = context.seq_length;
  c->norm_epsilon = flags.number("norm-epsilon");
  c->rotary_base = flags.number("rotary-base");
  c->tie_embeddings = !flags.enabled("untie-embeddings-and-output-weights");
  c->apply_layernorm_1p = flags.enabled("apply-layernorm-1p");
  read_moe_flags(flags, *c);
  for (const char* dropout : {"attention-dropout", "hidden-dropout"}) {
    if (flags.number(dropout) != 0.0) {
      throw std::invalid_argument("--" + std::string(dropout) + " " + flags.text(dropout) +
                                  ": the llama family trains without dropout (only 0; --model-type gpt has dropout)");
    }
  }
  c->validate();
  if (c->max_position_embeddings < context.seq_length) {
    throw std::invalid_argument("--max-position-embeddings (" + std::to_string(c->max_position_embeddings) +
                                ") must be >= --seq-length (" + std::to_string(context.seq_length) + ")");
  }
  return c;
}

std::shared_ptr<const ModelConfig> LlamaFamily::config_from_args(const nlohmann::json& args,
                                                                 const std::string& where) const {
  const ConfigKeys keys(args, where + " args");
  auto c = std::make_shared<LlamaConfig>();
  c->num_layers = keys.positive("num_layers");
  c->hidden_size = keys.positive("hidden_size");
  c->ffn_hidden_size = keys.positive("ffn_hidden_size");
  c->num_attention_heads = keys.positive("num_attention_heads");
  c->num_query_groups = keys.positive("num_query_groups");
  c->kv_channels = keys.positive("kv_channels");
  c->qk_layernorm = keys.flag("qk_layernorm");
  c->add_qkv_bias = keys.flag("add_qkv_bias", false);  // absent before megacpp had it
  if (keys.get("sliding_window")) c->sliding_window = keys.positive("sliding_window");
  c->max_position_embeddings = keys.positive("max_position_embeddings");
  c->rotary_base = keys.number("rotary_base");
  c->norm_epsilon = keys.number("norm_epsilon");
  c->vocab_size = keys.positive("padded_vocab_size");
  c->tie_embeddings = !keys.flag("untie_embeddings_and_output_weights");
  c->apply_layernorm_1p = keys.flag("apply_layernorm_1p", false);
  read_moe_args(keys, *c);
  c->validate();
  return c;
}

std::shared_ptr<LanguageModel> LlamaFamily::build(const ModelConfig& config, const at::TensorOptions& options) const {
  return std::make_shared<LlamaModel>(config_as<LlamaConfig>(config), options);
}

nlohmann::json LlamaFamily::to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const {
  return llama_hf_config(config_as<LlamaConfig>(config), torch_dtype);
}

std::shared_ptr<const ModelConfig> LlamaFamily::from_hf_config(const nlohmann::json& config, const std::string& path) const {
  return std::make_shared<LlamaConfig>(llama_config_from_hf(config, path));
}

// Hugging Face's RMSNorm scales by its weight: a zero-centered one is stored plus 1.
HfTensorName LlamaFamily::to_hf_tensor(const ModelConfig& config, const std::string& fqn) const {
  HfTensorName hf{llama_hf_name(fqn)};
  const bool norm = fqn.find("norm.weight") != std::string::npos;  // input_, post_attention_, q_, k_ and the final norm
  if (norm && config_as<LlamaConfig>(config).apply_layernorm_1p) hf.offset = 1.0;
  return hf;
}

std::optional<std::string> LlamaFamily::from_hf_tensor(const ModelConfig& config, const std::string& hf_name) const {
  // Tied models may still carry lm_head.weight (a copy of the embedding): nothing to keep.
  if (hf_name == "lm_head.weight" && config_as<LlamaConfig>(config).tie_embeddings) return std::nullopt;
  return llama_name_from_hf(hf_name);
}

}  // namespace megacpp::models
