// The "llava" model family: a CLIP vision tower and projector in front of a language model of
// another family (--language-model-type, llama by default), as transformers'
// LlavaForConditionalGeneration (Note [Model families]). It reads the vision flags and passes
// the language model's flags, with that family's defaults, on to it.
#pragma once

#include "models/model_family.h"

namespace megacpp::models {

class LlavaFamily : public ModelFamily {
 public:
  std::string name() const override { return "llava"; }
  // Its own flags, then every flag of the other registered families (for the language model).
  std::vector<ModelFlag> flags() const override;
  std::shared_ptr<const ModelConfig> config_from_flags(const ModelFlagValues& flags,
                                                       const ModelContext& context) const override;
  std::shared_ptr<const ModelConfig> config_from_args(const nlohmann::json& args, const std::string& where) const override;
  std::shared_ptr<LanguageModel> build(const ModelConfig& config, const at::TensorOptions& options) const override;

  std::vector<std::string> hf_model_types() const override { return {"llava"}; }
  nlohmann::json to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const override;
  std::shared_ptr<const ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& path) const override;
  // vision_tower.* and multi_modal_projector.* keep their names; language_model.X is
  // language_model. + the language family's name of X (language_model.model.layers.0...,
  // language_model.lm_head.weight), the layout transformers saves.
  HfTensorName to_hf_tensor(const ModelConfig& config, const std::string& fqn) const override;
  // Also reads transformers >= 4.52's layout: model.vision_tower.*, model.multi_modal_projector.*,
  // model.language_model.X (the language model's model.X) and lm_head.weight.
  std::optional<std::string> from_hf_tensor(const ModelConfig& config, const std::string& hf_name) const override;
};

}  // namespace megacpp::models
