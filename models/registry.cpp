#include "models/registry.h"

#include <map>
#include <stdexcept>

#include "models/llama/llama_model.h"

namespace megacpp::models {
namespace {

std::map<std::string, ModelFactory>& factories() {
  static std::map<std::string, ModelFactory> map = {
      {"llama", [](const LlamaConfig& c, const at::TensorOptions& o) { return std::make_shared<LlamaModel>(c, o); }},
  };
  return map;
}

}  // namespace

void register_model(const std::string& name, ModelFactory factory) { factories()[name] = std::move(factory); }

std::vector<std::string> registered_models() {
  std::vector<std::string> names;
  for (auto& [name, f] : factories()) names.push_back(name);
  return names;
}

std::shared_ptr<LanguageModel> create_model(const std::string& name, const LlamaConfig& config,
                                            const at::TensorOptions& options) {
  auto it = factories().find(name);
  if (it == factories().end()) {
    std::string known;
    for (auto& n : registered_models()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("--model-type '" + name + "' is not registered (known: " + known + ")");
  }
  return it->second(config, options);
}

}  // namespace megacpp::models
