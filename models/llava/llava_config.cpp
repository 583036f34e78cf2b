#include "models/llava/llava_config.h"

#include <sstream>
#include <stdexcept>

#include "megacpp/errors.h"
#include "models/registry.h"

namespace megacpp::models {
namespace {

// The vision fields of the args, in the order the flags take them.
const char* const kVisionArgs[] = {"vision_model_type", "vision_num_layers", "vision_hidden_size", "vision_ffn_hidden_size",
                                   "vision_num_attention_heads", "vision_norm_epsilon", "img_h", "img_w", "patch_dim",
                                   "num_channels", "vision_feature_layer", "vision_feature_select_strategy", "image_token_id",
                                   "disable_projector_bias", "freeze_vit", "freeze_lm", "language_model_type"};

}  // namespace

const ModelFamily& LlavaConfig::text_family() const { return model_family(text->model_type()); }

int64_t LlavaConfig::text_vocab_size() const {
  const nlohmann::json args = text->to_args();
  const auto vocab = args.find("padded_vocab_size");
  if (vocab == args.end() || !vocab->is_number_integer()) {
    throw std::invalid_argument("--language-model-type " + text->model_type() + ": its args record no padded_vocab_size");
  }
  return vocab->get<int64_t>();
}

void LlavaConfig::validate() const {
  const ClipVisionConfig& v = settings.vision;
  require(v.num_layers > 0, "--vision-num-layers must be positive");
  require(v.hidden_size > 0 && v.num_heads > 0 && v.hidden_size % v.num_heads == 0,
          "--vision-hidden-size (" + std::to_string(v.hidden_size) + ") must be a positive multiple of --vision-num-attention-heads (" +
              std::to_string(v.num_heads) + ")");
  require(v.intermediate_size > 0, "--vision-ffn-hidden-size must be positive");
  require(v.layer_norm_eps > 0, "--vision-norm-epsilon must be positive");
  require(v.num_channels == 1 || v.num_channels == 3, "--num-channels must be 1 (grey) or 3 (RGB), got " + std::to_string(v.num_channels));
  require(v.patch_size > 0 && v.image_size > 0 && v.image_size % v.patch_size == 0,
          "--img-h (" + std::to_string(v.image_size) + ") must be a positive multiple of --patch-dim (" + std::to_string(v.patch_size) + ")");
  require(settings.vision_layers_run() >= 0 && settings.vision_layers_run() <= v.num_layers,
          "--vision-feature-layer " + std::to_string(settings.vision_feature_layer) + " is not a hidden state of a " +
              std::to_string(v.num_layers) + "-layer vision tower (0.." + std::to_string(v.num_layers) + ", or -1..-" +
              std::to_string(v.num_layers + 1) + ")");
  require(settings.vision_feature_select_strategy == "default" || settings.vision_feature_select_strategy == "full",
          "--vision-feature-select-strategy must be default (drop the class token) or full, got '" +
              settings.vision_feature_select_strategy + "'");
  const int64_t vocab = text_vocab_size();
  require(settings.image_token_id >= 0 && settings.image_token_id < vocab,
          "--image-token-id " + std::to_string(settings.image_token_id) + " is not in the language model's vocabulary of " +
              std::to_string(vocab));
}

nlohmann::json LlavaConfig::to_args() const {
  nlohmann::json args = text->to_args();
  const ClipVisionConfig& v = settings.vision;
  args["language_model_type"] = text->model_type();
  args["vision_model_type"] = "clip";
  args["vision_num_layers"] = v.num_layers;
  args["vision_hidden_size"] = v.hidden_size;
  args["vision_ffn_hidden_size"] = v.intermediate_size;
  args["vision_num_attention_heads"] = v.num_heads;
  args["vision_norm_epsilon"] = v.layer_norm_eps;
  args["img_h"] = v.image_size;
  args["img_w"] = v.image_size;
  args["patch_dim"] = v.patch_size;
  args["num_channels"] = v.num_channels;
  args["vision_feature_layer"] = settings.vision_feature_layer;
  args["vision_feature_select_strategy"] = settings.vision_feature_select_strategy;
  args["image_token_id"] = settings.image_token_id;
  args["disable_projector_bias"] = !settings.projector_bias;
  args["freeze_vit"] = settings.freeze_vision_tower;
  args["freeze_lm"] = settings.freeze_language_model;
  return args;
}

std::string LlavaConfig::to_flags() const {
  const ClipVisionConfig& v = settings.vision;
  std::ostringstream flags;
  flags << "--language-model-type " << text->model_type() << " " << text->to_flags() << " --vision-num-layers " << v.num_layers
        << " --vision-hidden-size " << v.hidden_size << " --vision-ffn-hidden-size " << v.intermediate_size
        << " --vision-num-attention-heads " << v.num_heads << " --vision-norm-epsilon " << v.layer_norm_eps << " --img-h "
        << v.image_size << " --img-w " << v.image_size << " --patch-dim " << v.patch_size << " --num-channels " << v.num_channels
        << " --vision-feature-layer " << settings.vision_feature_layer << " --vision-feature-select-strategy "
        << settings.vision_feature_select_strategy << " --image-token-id " << settings.image_token_id
        << (settings.projector_bias ? "" : " --disable-projector-bias") << (settings.freeze_vision_tower ? " --freeze-ViT" : "")
        << (settings.freeze_language_model ? " --freeze-LM" : "");
  return flags.str();
}

bool LlavaConfig::checkpoint_must_match(const std::string& field) const {
  if (field == "freeze_vit" || field == "freeze_lm") return false;
  for (const char* own : kVisionArgs) {
    if (field == own) return true;
  }
  return text->checkpoint_must_match(field);
}

}  // namespace megacpp::models
