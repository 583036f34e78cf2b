// Model families selectable by name (--model-type). A family registers itself once, when
// its library is loaded (Note [Model families] in models/model_family.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model_family.h"

namespace megacpp::models {

// The family --model-type names when it is not given, and that a checkpoint whose args
// record no model_type (saved before families existed, or by PyTorch) holds.
inline constexpr const char* kDefaultModelType = "llama";

// Throws std::invalid_argument when a family of that name is registered already.
void register_family(std::shared_ptr<const ModelFamily> family);
// Throws std::invalid_argument naming --model-type and the registered names.
const ModelFamily& model_family(const std::string& name);
// Every registered family, by name.
std::vector<const ModelFamily*> registered_families();
// The family that reads a config.json of this model_type: `chosen` (a --model-type) when not
// empty, else the only family that reads it. Throws naming `path` and the key when none does,
// or when several do and none is chosen.
const ModelFamily& family_for_hf_model_type(const std::string& hf_model_type, const std::string& path,
                                            const std::string& chosen = "");

// Builds the model `config` describes with its family.
std::shared_ptr<LanguageModel> create_model(const ModelConfig& config, const at::TensorOptions& options);

// Loads a shared library whose MEGACPP_REGISTER_MODEL_FAMILY lines register families
// (--model-library). Throws std::invalid_argument naming the flag and the file when it cannot
// be loaded, registers nothing, or a registration fails (a name taken already). Loading the
// same path twice does nothing.
void load_model_library(const std::string& path);

namespace detail {
// Registration from a static initializer: an error is kept for load_model_library (or the
// next model_family call) to report, since nothing can catch it during loading.
bool register_family_at_load(std::shared_ptr<const ModelFamily> family) noexcept;
}  // namespace detail

}  // namespace megacpp::models

// Registers `Family` (a ModelFamily with a default constructor) when the library or
// executable that holds this line is loaded. Use once, at namespace scope in a .cpp file.
#define MEGACPP_REGISTER_MODEL_FAMILY(Family)                                     \
  static const bool megacpp_model_family_registered_##Family =                     \
      ::megacpp::models::detail::register_family_at_load(std::make_shared<Family>())
