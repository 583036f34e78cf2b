#include "models/freeze.h"

#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

namespace megacpp::models {
namespace {

bool under(const std::string& name, const std::string& prefix) {
  return name == prefix || (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.');
}

}  // namespace

void freeze_module_prefixes(LanguageModel& model, const std::vector<std::string>& given) {
  std::vector<std::string> prefixes;
  for (std::string prefix : given) {
    while (!prefix.empty() && prefix.back() == '.') prefix.pop_back();  // ROLL's "vision_model." style
    prefixes.push_back(prefix);
  }
  const auto params = model.named_parameters(/*recurse=*/true);
  for (const std::string& prefix : prefixes) {
    bool found = false;
    for (const auto& item : params) found = found || under(item.key(), prefix);
    if (found) continue;
    std::vector<std::string> children;
    for (const auto& child : model.named_children()) children.push_back(child.key());
    throw std::invalid_argument("freeze_module_prefix: '" + prefix + "' names no parameter of the model (its top-level modules: " +
                                fmt::format("{}", fmt::join(children, ", ")) + ")");
  }
  int64_t frozen = 0, trainable = 0;
  for (const auto& item : params) {
    bool freeze = false;
    for (const std::string& prefix : prefixes) freeze = freeze || under(item.key(), prefix);
    if (freeze) item.value().set_requires_grad(false);
    if (!item.value().requires_grad()) frozen += item.value().numel();
    if (item.value().requires_grad()) trainable += item.value().numel();
  }
  if (trainable == 0) {
    throw std::invalid_argument("freeze_module_prefix: " + fmt::format("{}", fmt::join(prefixes, ", ")) +
                                " leaves no parameter to train");
  }
  spdlog::info("freeze: {} ({} frozen parameters, {} trainable)", fmt::join(prefixes, ", "), frozen, trainable);
}

}  // namespace megacpp::models
