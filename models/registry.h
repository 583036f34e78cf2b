// Models selectable by name (--model-type). A user model registers itself with
// register_model before main parses flags.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/language_model.h"
#include "models/llama/llama_config.h"

namespace megacpp::models {

using ModelFactory = std::function<std::shared_ptr<LanguageModel>(const LlamaConfig&, const at::TensorOptions&)>;

void register_model(const std::string& name, ModelFactory factory);
// Throws std::invalid_argument naming --model-type and the registered names.
std::shared_ptr<LanguageModel> create_model(const std::string& name, const LlamaConfig& config,
                                            const at::TensorOptions& options);
std::vector<std::string> registered_models();

}  // namespace megacpp::models
