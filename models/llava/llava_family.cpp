#include "models/llava/llava_family.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "models/config_keys.h"
#include "models/llava/llava_config.h"
#include "models/llava/llava_hf.h"
#include "models/registry.h"

namespace megacpp::models {

MEGACPP_REGISTER_MODEL_FAMILY(LlavaFamily);

namespace {

// The flags LLaVA reads itself; every other flag it declares goes to the language model.
std::vector<ModelFlag> own_flags() {
  return {
      {"language-model-type", "the language model's family (a --model-type taking input embeddings)", "llama"},
      {"vision-model-type", "the vision tower: clip (CLIP's ViT, as LLaVA's)", "clip"},
      {"vision-num-layers", "encoder layers of the vision tower", "2"},
      {"vision-hidden-size", "hidden size of the vision tower", "64"},
      {"vision-ffn-hidden-size", "MLP hidden size of the vision tower (default 4 x --vision-hidden-size)", "0"},
      {"vision-num-attention-heads", "attention heads of the vision tower", "4"},
      {"vision-norm-epsilon", "epsilon of the vision tower's LayerNorms", "1e-5"},
      {"img-h", "image height in pixels", "224"},
      {"img-w", "image width in pixels (CLIP's images are square: --img-h)", "224"},
      {"patch-dim", "patch size in pixels", "16"},
      {"num-channels", "image channels", "3"},
      {"vision-feature-layer", "the vision hidden state given to the projector (0: the embeddings; negative from the end)", "-2"},
      {"vision-feature-select-strategy", "default (drop the class token's feature) or full", "default"},
      {"image-token-id", "the image placeholder's token id (-1: the last id of the padded vocabulary)", "-1"},
      {"disable-projector-bias", "the projector's Linears without biases", "", true},
      {"freeze-ViT", "freeze the vision tower (Megatron's; the projector still trains)", "", true},
      {"freeze-LM", "freeze the language model (Megatron's)", "", true},
  };
}

const ModelFamily& language_family(const std::string& type, const std::string& what) {
  if (type == "llava") throw std::invalid_argument(what + " llava: the language model cannot itself be a LLaVA model");
  try {
    return model_family(type);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + " " + type + ": " + e.what());
  }
}

// The language model's flag values: those given, and its family's own defaults for the rest.
// A flag given that its family does not read is refused by name.
ModelFlagValues language_flag_values(const ModelFlagValues& flags, const ModelFamily& family) {
  std::map<std::string, std::string> values;
  std::set<std::string> given;
  for (const ModelFlag& flag : family.flags()) {
    if (flags.given(flag.name)) {
      values[flag.name] = flags.text(flag.name);
      given.insert(flag.name);
    } else {
      values[flag.name] = flag.is_switch ? "false" : flag.default_value;
    }
  }
  std::set<std::string> own;
  for (const ModelFlag& flag : own_flags()) own.insert(flag.name);
  for (const ModelFlag& flag : LlavaFamily().flags()) {
    if (flags.given(flag.name) && !own.count(flag.name) && !values.count(flag.name)) {
      throw std::invalid_argument("--" + flag.name + " is not read by --language-model-type " + family.name());
    }
  }
  return ModelFlagValues(std::move(values), std::move(given));
}

}  // namespace

std::vector<ModelFlag> LlavaFamily::flags() const {
  std::vector<ModelFlag> out = own_flags();
  std::set<std::string> seen;
  for (const ModelFlag& flag : out) seen.insert(flag.name);
  // The default language model's flags first, so that its defaults are those shown.
  std::vector<const ModelFamily*> families = registered_families();
  std::stable_partition(families.begin(), families.end(), [](const ModelFamily* f) { return f->name() == kDefaultModelType; });
  for (const ModelFamily* family : families) {
    if (family->name() == name()) continue;
    for (const ModelFlag& flag : family->flags()) {
      if (seen.insert(flag.name).second) out.push_back(flag);
    }
  }
  return out;
}

std::shared_ptr<const ModelConfig> LlavaFamily::config_from_flags(const ModelFlagValues& flags, const ModelContext& context) const {
  const ModelFamily& text_family = language_family(flags.text("language-model-type"), "--language-model-type");
  if (flags.text("vision-model-type") != "clip") {
    throw std::invalid_argument("--vision-model-type " + flags.text("vision-model-type") + ": only clip is implemented");
  }
  if (flags.integer("img-w") != flags.integer("img-h")) {
    throw std::invalid_argument("--img-w " + flags.text("img-w") + " must equal --img-h " + flags.text("img-h") +
                                ": CLIP's images are square");
  }
  auto c = std::make_shared<LlavaConfig>();
  c->text = text_family.config_from_flags(language_flag_values(flags, text_family), context);
  ClipVisionConfig& v = c->settings.vision;
  v.num_layers = flags.integer("vision-num-layers");
  v.hidden_size = flags.integer("vision-hidden-size");
  v.intermediate_size = flags.integer("vision-ffn-hidden-size");
  if (v.intermediate_size == 0) v.intermediate_size = 4 * v.hidden_size;
  v.num_heads = flags.integer("vision-num-attention-heads");
  v.layer_norm_eps = flags.number("vision-norm-epsilon");
  v.image_size = flags.integer("img-h");
  v.patch_size = flags.integer("patch-dim");
  v.num_channels = flags.integer("num-channels");
  c->settings.vision_feature_layer = flags.integer("vision-feature-layer");
  c->settings.vision_feature_select_strategy = flags.text("vision-feature-select-strategy");
  c->settings.image_token_id = flags.integer("image-token-id");
  if (c->settings.image_token_id == -1) c->settings.image_token_id = c->text_vocab_size() - 1;
  c->settings.projector_bias = !flags.enabled("disable-projector-bias");
  c->settings.freeze_vision_tower = flags.enabled("freeze-ViT");
  c->settings.freeze_language_model = flags.enabled("freeze-LM");
  c->validate();
  return c;
}

std::shared_ptr<const ModelConfig> LlavaFamily::config_from_args(const nlohmann::json& args, const std::string& where) const {
  const ConfigKeys keys(args, where + " args");
  auto c = std::make_shared<LlavaConfig>();
  const std::string text_type = keys.text("language_model_type", std::string(kDefaultModelType));
  c->text = language_family(text_type, where + " args: key 'language_model_type':").config_from_args(args, where);
  if (keys.text("vision_model_type", "clip") != "clip") keys.fail("vision_model_type", "only clip is implemented");
  ClipVisionConfig& v = c->settings.vision;
  v.num_layers = keys.positive("vision_num_layers");
  v.hidden_size = keys.positive("vision_hidden_size");
  v.intermediate_size = keys.positive("vision_ffn_hidden_size");
  v.num_heads = keys.positive("vision_num_attention_heads");
  v.layer_norm_eps = keys.number("vision_norm_epsilon");
  v.image_size = keys.positive("img_h");
  if (keys.positive("img_w") != v.image_size) keys.fail("img_w", "must equal img_h (CLIP's images are square)");
  v.patch_size = keys.positive("patch_dim");
  v.num_channels = keys.positive("num_channels");
  c->settings.vision_feature_layer = keys.integer("vision_feature_layer");
  c->settings.vision_feature_select_strategy = keys.text("vision_feature_select_strategy");
  c->settings.image_token_id = keys.integer("image_token_id");
  c->settings.projector_bias = !keys.flag("disable_projector_bias", false);
  c->settings.freeze_vision_tower = keys.flag("freeze_vit", false);
  c->settings.freeze_language_model = keys.flag("freeze_lm", false);
  c->validate();
  return c;
}

std::shared_ptr<LanguageModel> LlavaFamily::build(const ModelConfig& config, const at::TensorOptions& options) const {
  const auto& c = config_as<LlavaConfig>(config);
  return std::make_shared<LlavaModel>(c.settings, c.text_family().build(*c.text, options), options);
}

nlohmann::json LlavaFamily::to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const {
  return llava_hf_config(config_as<LlavaConfig>(config), torch_dtype);
}

std::shared_ptr<const ModelConfig> LlavaFamily::from_hf_config(const nlohmann::json& config, const std::string& path) const {
  return llava_config_from_hf(config, path);
}

HfTensorName LlavaFamily::to_hf_tensor(const ModelConfig& config, const std::string& fqn) const {
  return llava_hf_tensor(config_as<LlavaConfig>(config), fqn);
}

std::optional<std::string> LlavaFamily::from_hf_tensor(const ModelConfig& config, const std::string& hf_name) const {
  return llava_tensor_from_hf(config_as<LlavaConfig>(config), hf_name);
}

}  // namespace megacpp::models
