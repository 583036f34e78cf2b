#include "models/fsdp2_mixin.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

namespace megacpp::models {
namespace {

// MindSpeed names modules by class path in sub_modules_to_wrap, recompute_modules and
// ignored_modules (transformers.models.qwen3.modeling_qwen3.Qwen3DecoderLayer): an entry whose
// last segment is a class name (it starts with a capital; module paths do not) stands for the
// modules of that class.
std::vector<std::string> with_classes_resolved(const std::vector<std::string>& entries,
                                               const std::vector<std::pair<std::string, std::string>>& classes,
                                               const std::string& known_text, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& entry : entries) {
    const std::string last = entry.substr(entry.rfind('.') == std::string::npos ? 0 : entry.rfind('.') + 1);
    const bool is_class = entry.find('{') == std::string::npos && !last.empty() && std::isupper(static_cast<unsigned char>(last[0]));
    if (!is_class) {
      out.push_back(entry);
      continue;
    }
    bool found = false;
    for (const auto& [class_name, pattern] : classes) {
      if (class_name != last) continue;
      found = true;
      if (std::find(out.begin(), out.end(), pattern) == out.end()) out.push_back(pattern);
    }
    if (!found) throw std::invalid_argument(key + ": '" + entry + "' is not a module class of this model (known: " + known_text + ")");
  }
  return out;
}

// wrap_policy's class names: transformer_layer_cls_to_wrap, and every class of the model when
// the default applies (ROLL's: no classes and no sub_modules_to_wrap named).
std::vector<std::string> classes_to_wrap(const WrapPolicy& config, const std::vector<std::pair<std::string, std::string>>& classes) {
  std::vector<std::string> names = config.module_classes_to_wrap;
  if (!config.wrap_default_module_classes) return names;
  if (classes.empty()) {
    throw std::invalid_argument("wrap_policy: this model lists no module classes, so the default (wrap every "
                                "decoder layer class) does not apply; name the modules with sub_modules_to_wrap");
  }
  for (auto& [name, pattern] : classes) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

const char* const kNoClasses = "none; name modules with sub_modules_to_wrap";

// The distinct class names of `classes`, for errors; `if_none` when there are none.
std::string known_names(const std::vector<std::pair<std::string, std::string>>& classes, const std::string& if_none) {
  std::vector<std::string> known;
  for (auto& entry : classes) {
    if (std::find(known.begin(), known.end(), entry.first) == known.end()) known.push_back(entry.first);
  }
  return known.empty() ? if_none : fmt::format("{}", fmt::join(known, ", "));
}

// The module patterns of the named classes (wrap_policy's transformer_layer_cls_to_wrap or
// moe_experts). A name none of `classes` has is refused: "KEY: 'NAME' is not a WHAT of this model
// (known: KNOWN)".
std::vector<std::string> patterns_of_classes(const std::vector<std::string>& names,
                                             const std::vector<std::pair<std::string, std::string>>& classes,
                                             const std::string& key, const std::string& what, const std::string& known) {
  std::vector<std::string> patterns;
  for (auto& name : names) {
    const size_t before = patterns.size();
    for (auto& [class_name, pattern] : classes) {
      if (class_name == name) patterns.push_back(pattern);
    }
    if (patterns.size() == before) {
      throw std::invalid_argument(key + ": '" + name + "' is not " + what + " of this model (known: " + known + ")");
    }
  }
  return patterns;
}

}  // namespace

RecomputePolicy FSDP2Mixin::resolve_module_classes(const RecomputePolicy& given) const {
  RecomputePolicy out = given;
  const auto classes = module_classes();
  out.recompute_modules =
      with_classes_resolved(given.recompute_modules, classes, known_names(classes, kNoClasses), "recompute_modules");
  if (!given.recompute_default_module_classes) return out;
  if (classes.empty()) {
    throw std::invalid_argument("--recompute-granularity full: this model lists no module classes (layers) to "
                                "recompute; name the modules with recompute_modules in fsdp2_config.yaml");
  }
  for (const auto& entry : classes) {
    auto& recompute = out.recompute_modules;
    if (std::find(recompute.begin(), recompute.end(), entry.second) == recompute.end()) recompute.push_back(entry.second);
  }
  out.recompute_default_module_classes = false;
  return out;
}

WrapPolicy FSDP2Mixin::resolve_module_classes(const WrapPolicy& config) const {
  WrapPolicy out = config;
  out.module_classes_to_wrap.clear();
  out.wrap_default_module_classes = false;
  out.wrap_embeddings = false;
  out.wrap_lm_output = false;
  out.expert_classes_to_wrap.clear();
  auto add = [&out](const std::string& pattern) {
    auto& wrap = out.sub_modules_to_wrap;
    if (std::find(wrap.begin(), wrap.end(), pattern) == wrap.end()) wrap.push_back(pattern);
  };
  const auto classes = module_classes();
  const std::string known_text = known_names(classes, kNoClasses);
  out.sub_modules_to_wrap = with_classes_resolved(config.sub_modules_to_wrap, classes, known_text, "sub_modules_to_wrap");
  out.ignored_modules = with_classes_resolved(config.ignored_modules, classes, known_text, "ignored_modules");
  if (config.wrap_embeddings) {
    const std::string path = input_embeddings_path();
    if (path.empty()) throw std::invalid_argument("wrap_embeddings: this model has no token embedding module to wrap");
    add(path);
  }
  std::vector<std::string> names = classes_to_wrap(config, classes);
  for (auto& pattern : patterns_of_classes(names, classes, "wrap_policy.transformer_layer_cls_to_wrap", "a module class",
                                           known_text)) {
    add(pattern);
  }
  const auto experts = expert_module_classes();
  for (auto& pattern : patterns_of_classes(config.expert_classes_to_wrap, experts, "wrap_policy.moe_experts", "an expert class",
                                           known_names(experts, "none: it has no mixture-of-experts layers"))) {
    add(pattern);
  }
  if (config.wrap_lm_output) {
    const std::string path = output_layer_path();
    if (path.empty()) {
      throw std::invalid_argument(
          "wrap_lm_output: this model has no output layer module of its own (with tied embeddings the output "
          "layer reads the token embedding's weight); untie them (--untie-embeddings-and-output-weights) or set "
          "wrap_lm_output: false");
    }
    add(path);
  }
  for (auto& name : config.expert_classes_to_wrap) names.push_back(name);
  if (!names.empty() || config.wrap_embeddings || config.wrap_lm_output) {
    spdlog::info("fsdp2: wrap by class [{}]{}{} -> sub_modules_to_wrap [{}]", fmt::join(names, ", "),
                 config.wrap_embeddings ? " + embeddings" : "", config.wrap_lm_output ? " + lm output" : "",
                 fmt::join(out.sub_modules_to_wrap, ", "));
  }
  return out;
}

}  // namespace megacpp::models
