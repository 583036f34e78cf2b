#include "models/llava/llava_hf.h"

#include <regex>
#include <stdexcept>

#include "models/config_keys.h"
#include "models/registry.h"

namespace megacpp::models {
namespace {

using nlohmann::json;

const char* const kLegacyText = "language_model.";
const char* const kNewText = "model.language_model.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

json vision_hf_config(const ClipVisionConfig& v) {
  return {{"model_type", "clip_vision_model"}, {"hidden_size", v.hidden_size}, {"intermediate_size", v.intermediate_size},
          {"num_hidden_layers", v.num_layers}, {"num_attention_heads", v.num_heads}, {"num_channels", v.num_channels},
          {"image_size", v.image_size}, {"patch_size", v.patch_size}, {"layer_norm_eps", v.layer_norm_eps},
          {"hidden_act", "quick_gelu"}, {"attention_dropout", 0.0}};
}

// transformers' CLIPVisionConfig defaults; LlavaConfig's own when vision_config is absent.
ClipVisionConfig vision_from_hf(const json& config, const std::string& path) {
  const json* given = ConfigKeys(config, path).get("vision_config");
  ClipVisionConfig v;
  if (!given) {
    v.hidden_size = 1024, v.intermediate_size = 4096, v.num_layers = 24, v.num_heads = 16, v.image_size = 336, v.patch_size = 14;
    return v;
  }
  if (!given->is_object()) ConfigKeys(config, path).fail("vision_config", "expected an object, got " + given->dump());
  const ConfigKeys keys(*given, path + ": vision_config");
  keys.refuse_unless("model_type", "clip_vision_model", "the vision tower is CLIP's");
  keys.refuse_unless("hidden_act", "quick_gelu", "CLIP's MLP uses quick_gelu");
  keys.refuse_unless("attention_dropout", 0.0, "the vision tower trains without dropout");
  v.hidden_size = keys.positive("hidden_size", 768);
  v.intermediate_size = keys.positive("intermediate_size", 3072);
  v.num_layers = keys.positive("num_hidden_layers", 12);
  v.num_heads = keys.positive("num_attention_heads", 12);
  v.num_channels = keys.positive("num_channels", 3);
  v.image_size = keys.positive("image_size", 224);
  v.patch_size = keys.positive("patch_size", 32);
  v.layer_norm_eps = keys.number("layer_norm_eps", 1e-5);
  return v;
}

// text_config (LlamaConfig's defaults when absent), with the top-level tie_word_embeddings that
// older configs keep there.
std::shared_ptr<const ModelConfig> text_from_hf(const json& config, const std::string& path) {
  const ConfigKeys keys(config, path);
  json text = json{{"model_type", "llama"}};
  if (const json* given = keys.get("text_config")) {
    if (!given->is_object()) keys.fail("text_config", "expected an object, got " + given->dump());
    text = *given;
  }
  if (!text.contains("model_type")) text["model_type"] = "llama";
  if (!text.contains("tie_word_embeddings") && keys.get("tie_word_embeddings")) text["tie_word_embeddings"] = config["tie_word_embeddings"];
  const std::string where = path + ": text_config";
  if (!text["model_type"].is_string()) ConfigKeys(text, where).fail("model_type", "expected a string, got " + text["model_type"].dump());
  return family_for_hf_model_type(text["model_type"].get<std::string>(), where).from_hf_config(text, where);
}

// CLIP's and the projector's parameters (their names are the same in megacpp).
bool is_vision_or_projector_weight(const std::string& name) {
  static const std::regex known(
      "vision_tower\\.vision_model\\.(embeddings\\.(class_embedding|patch_embedding\\.weight|position_embedding\\.weight)|"
      "(pre_layrnorm|post_layernorm)\\.(weight|bias)|"
      "encoder\\.layers\\.[0-9]+\\.(self_attn\\.(q|k|v|out)_proj|layer_norm1|layer_norm2|mlp\\.fc1|mlp\\.fc2)\\.(weight|bias))|"
      "multi_modal_projector\\.linear_[12]\\.(weight|bias)");
  return std::regex_match(name, known);
}

}  // namespace

json llava_hf_config(const LlavaConfig& c, const std::string& torch_dtype) {
  json text = c.text_family().to_hf_config(*c.text, torch_dtype);
  const LlavaSettings& s = c.settings;
  return {{"architectures", {"LlavaForConditionalGeneration"}},
          {"model_type", "llava"},
          {"image_token_index", s.image_token_id},
          {"image_seq_length", s.tokens_per_image()},
          {"projector_hidden_act", "gelu"},
          {"multimodal_projector_bias", s.projector_bias},
          {"vision_feature_layer", s.vision_feature_layer},
          {"vision_feature_select_strategy", s.vision_feature_select_strategy},
          {"tie_word_embeddings", text.value("tie_word_embeddings", false)},
          {"torch_dtype", torch_dtype},
          {"text_config", text},
          {"vision_config", vision_hf_config(s.vision)}};
}

std::shared_ptr<LlavaConfig> llava_config_from_hf(const json& config, const std::string& path) {
  const ConfigKeys keys(config, path);
  keys.refuse_unless("model_type", "llava", "the llava family reads LLaVA's config");
  keys.refuse_unless("projector_hidden_act", "gelu", "the projector uses the exact gelu");
  if (const json* layer = keys.get("vision_feature_layer"); layer && !layer->is_number_integer()) {
    keys.fail("vision_feature_layer", layer->dump() + " is not supported: the features of one layer only");
  }
  auto c = std::make_shared<LlavaConfig>();
  c->text = text_from_hf(config, path);
  LlavaSettings& s = c->settings;
  s.vision = vision_from_hf(config, path);
  s.vision_feature_layer = keys.integer("vision_feature_layer", -2);
  s.vision_feature_select_strategy = keys.text("vision_feature_select_strategy", std::string("default"));
  s.image_token_id = keys.get("image_token_index") ? keys.integer("image_token_index") : keys.integer("image_token_id", 32000);
  s.projector_bias = keys.flag("multimodal_projector_bias", true);
  if (s.image_token_id < 0 || s.image_token_id >= c->text_vocab_size()) {
    keys.fail(keys.get("image_token_index") ? "image_token_index" : "image_token_id",
              std::to_string(s.image_token_id) + " is not in text_config's vocabulary of " + std::to_string(c->text_vocab_size()));
  }
  try {
    c->validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  return c;
}

HfTensorName llava_hf_tensor(const LlavaConfig& c, const std::string& fqn) {
  if (!starts_with(fqn, kLegacyText)) return {fqn};
  HfTensorName text = c.text_family().to_hf_tensor(*c.text, fqn.substr(std::string(kLegacyText).size()));
  text.name = kLegacyText + text.name;
  return text;
}

std::optional<std::string> llava_tensor_from_hf(const LlavaConfig& c, const std::string& hf_name) {
  auto text = [&](const std::string& text_name) -> std::optional<std::string> {
    const auto fqn = c.text_family().from_hf_tensor(*c.text, text_name);
    return fqn ? std::optional<std::string>(kLegacyText + *fqn) : std::nullopt;
  };
  if (starts_with(hf_name, kNewText)) return text("model." + hf_name.substr(std::string(kNewText).size()));
  if (hf_name == "lm_head.weight") return text(hf_name);
  if (starts_with(hf_name, kLegacyText)) return text(hf_name.substr(std::string(kLegacyText).size()));
  const std::string name = starts_with(hf_name, "model.") ? hf_name.substr(6) : hf_name;
  if (name == "vision_tower.vision_model.embeddings.position_ids") return std::nullopt;  // a buffer older versions saved
  if (!is_vision_or_projector_weight(name)) throw std::invalid_argument("'" + hf_name + "' is not a weight of a LLaVA model");
  return name;
}

}  // namespace megacpp::models
