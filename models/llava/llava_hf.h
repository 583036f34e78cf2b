// Hugging Face interop for LLaVA: config.json <-> LlavaConfig (transformers' LlavaConfig with a
// CLIPVisionConfig and the language model's text_config), and weight names.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "models/llava/llava_config.h"

namespace megacpp::models {

// LlavaForConditionalGeneration's config.json; text_config is the language family's.
nlohmann::json llava_hf_config(const LlavaConfig& config, const std::string& torch_dtype);

// The LlavaConfig a config.json describes, with transformers' defaults for absent keys. Refuses,
// naming `path` and the key, what megacpp cannot compute the same way: a vision tower other than
// CLIP's (vision_config.model_type), a tower activation other than quick_gelu or a projector one
// other than gelu, features of several layers, attention dropout; the text_config as its own
// family refuses.
std::shared_ptr<LlavaConfig> llava_config_from_hf(const nlohmann::json& config, const std::string& path);

HfTensorName llava_hf_tensor(const LlavaConfig& config, const std::string& fqn);
std::optional<std::string> llava_tensor_from_hf(const LlavaConfig& config, const std::string& hf_name);

}  // namespace megacpp::models
