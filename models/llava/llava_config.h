// The shape of a LLaVA model: the vision tower, projector and image token (LlavaSettings) and
// the language model's own config, of whichever family builds it (--language-model-type).
#pragma once

#include <memory>
#include <string>

#include "models/llava/llava_model.h"
#include "models/model_family.h"

namespace megacpp::models {

struct LlavaConfig : ModelConfig {
  LlavaSettings settings;
  std::shared_ptr<const ModelConfig> text;  // the language model's

  const ModelFamily& text_family() const;
  // The text config's padded vocabulary (its args' padded_vocab_size).
  int64_t text_vocab_size() const;
  // Throws std::invalid_argument naming the flag that is inconsistent.
  void validate() const;

  std::string model_type() const override { return "llava"; }
  // The language model's args, and language_model_type, vision_model_type ("clip"),
  // vision_num_layers, vision_hidden_size, vision_ffn_hidden_size, vision_num_attention_heads,
  // vision_norm_epsilon, img_h, img_w, patch_dim, num_channels, vision_feature_layer,
  // vision_feature_select_strategy, image_token_id, disable_projector_bias, freeze_vit,
  // freeze_lm.
  nlohmann::json to_args() const override;
  std::string to_flags() const override;
  // Freezing changes no weight; the language model decides for its own fields.
  bool checkpoint_must_match(const std::string& field) const override;
  std::optional<ImageInputs> image_inputs() const override {
    return ImageInputs{settings.image_token_id, settings.tokens_per_image(), settings.vision.num_channels, settings.vision.image_size};
  }
};

}  // namespace megacpp::models
