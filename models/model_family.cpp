#include "models/model_family.h"

#include <stdexcept>

namespace megacpp::models {
namespace {

[[noreturn]] void no_hf_mapping(const ModelFamily& family) {
  throw std::invalid_argument("model type '" + family.name() + "' has no Hugging Face mapping");
}

}  // namespace

nlohmann::json ModelFamily::to_hf_config(const ModelConfig&, const std::string&) const { no_hf_mapping(*this); }

std::shared_ptr<const ModelConfig> ModelFamily::from_hf_config(const nlohmann::json&, const std::string&) const {
  no_hf_mapping(*this);
}

HfTensorName ModelFamily::to_hf_tensor(const ModelConfig&, const std::string&) const { no_hf_mapping(*this); }

std::optional<std::string> ModelFamily::from_hf_tensor(const ModelConfig&, const std::string&) const {
  no_hf_mapping(*this);
}

}  // namespace megacpp::models
