#include "models/lora.h"

#include <set>
#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "models/config_keys.h"
#include "models/layers/linear.h"

namespace megacpp::models {
namespace {

bool names(const std::string& target, const std::string& path) {
  return path == target || (path.size() > target.size() && path.compare(path.size() - target.size(), target.size(), target) == 0 &&
                            path[path.size() - target.size() - 1] == '.');
}

std::string last_segment(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The targets with Megatron's names (LanguageModel::megatron_module_names) replaced by the
// modules they stand for, each said once in the log.
std::vector<std::string> targets_of(const LanguageModel& model, const std::vector<std::string>& targets) {
  const auto megatron = model.megatron_module_names();
  std::vector<std::string> out;
  for (const std::string& target : targets) {
    const auto it = megatron.find(target);
    if (it == megatron.end()) {
      out.push_back(target);
      continue;
    }
    spdlog::info("lora: {} (Megatron's name) adapts {}", target, fmt::join(it->second, ", "));
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

std::string megatron_names_text(const LanguageModel& model) {
  std::string text;
  for (const auto& [name, modules] : model.megatron_module_names()) text += ", " + name;
  return text.empty() ? text : text + " (Megatron's names)";
}

}  // namespace

bool is_lora_parameter(const std::string& name) {
  return name.find("lora_A.") != std::string::npos || name.find("lora_B.") != std::string::npos;
}

std::string lora_base_weight(const std::string& lora_name) {
  for (const char* part : {".lora_A.", ".lora_B."}) {
    if (const size_t at = lora_name.rfind(part); at != std::string::npos) return lora_name.substr(0, at) + ".weight";
  }
  throw std::invalid_argument("'" + lora_name + "' is not a LoRA parameter");
}

void add_lora_args(const LoraSettings& s, nlohmann::json& args) {
  if (s.rank == 0) return;
  args["lora_r"] = s.rank;
  args["lora_alpha"] = s.alpha;
  args["lora_dropout"] = s.dropout;
  args["lora_target_modules"] = s.target_modules;
}

LoraSettings lora_settings_from_args(const nlohmann::json& args, const std::string& where) {
  LoraSettings s;
  const ConfigKeys keys(args, where + " args");
  if (!keys.get("lora_r")) return s;
  s.rank = keys.positive("lora_r");
  s.alpha = keys.number("lora_alpha");
  if (s.alpha <= 0) keys.fail("lora_alpha", "expected a positive number, got " + std::to_string(s.alpha));
  s.dropout = keys.number("lora_dropout", 0.0);
  if (s.dropout < 0 || s.dropout >= 1) keys.fail("lora_dropout", "expected a number in [0, 1), got " + std::to_string(s.dropout));
  const nlohmann::json* targets = keys.get("lora_target_modules");
  if (!targets || !targets->is_array()) keys.fail("lora_target_modules", "expected a list of module names");
  for (const auto& t : *targets) {
    if (!t.is_string()) keys.fail("lora_target_modules", "expected a list of module names, got " + targets->dump());
    s.target_modules.push_back(t.get<std::string>());
  }
  if (s.target_modules.empty()) keys.fail("lora_target_modules", "names no module");
  return s;
}

std::vector<std::string> apply_lora(LanguageModel& model, const LoraSettings& s) {
  if (s.rank <= 0) throw std::invalid_argument("apply_lora: LoraSettings::rank is " + std::to_string(s.rank) + " (0: no LoRA, do not call it)");
  const std::string output = model.output_layer_path();
  std::vector<std::pair<std::string, Linear*>> linears;
  std::set<std::string> linear_names;
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    if (auto* linear = dynamic_cast<Linear*>(module)) {
      linears.emplace_back(path, linear);
      linear_names.insert(last_segment(path));
    }
  }
  std::vector<std::string> adapted;
  for (const std::string& target : targets_of(model, s.target_modules)) {
    bool found = false;
    for (auto& [path, linear] : linears) {
      const bool named = target == "all-linear" ? path != output : names(target, path);
      if (!named) continue;
      found = true;
      if (!linear->has_lora()) {
        linear->add_lora(s.rank, s.alpha, s.dropout);
        adapted.push_back(path);
      }
    }
    if (found) continue;
    for (auto& item : model.named_modules("", /*include_self=*/false)) {
      if (names(target, item.key())) {
        throw std::invalid_argument("--lora-target-modules: '" + target + "' names '" + item.key() +
                                    "', which is not a Linear layer; LoRA adapts Linear layers only");
      }
    }
    throw std::invalid_argument("--lora-target-modules: '" + target + "' matches no Linear layer of the model (its Linear "
                                "layers: " + fmt::format("{}", fmt::join(linear_names, ", ")) + ", or all-linear" +
                                megatron_names_text(model) + ")");
  }
  int64_t trainable = 0, frozen = 0;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const bool adapter = is_lora_parameter(item.key());
    item.value().set_requires_grad(adapter);
    (adapter ? trainable : frozen) += item.value().numel();
  }
  spdlog::info("lora: rank {}, alpha {}, dropout {} on {} Linear layer(s) ({}): {} trainable parameters, {} frozen",
               s.rank, s.alpha, s.dropout, adapted.size(), fmt::join(s.target_modules, ", "), trainable, frozen);
  return adapted;
}

AdaptersDisabled::AdaptersDisabled(LanguageModel& model) {
  for (auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<Linear*>(item.value().get());
    if (linear && linear->has_lora()) adapted_.push_back(linear);
  }
  for (Linear* linear : adapted_) linear->set_lora_enabled(false);
}

AdaptersDisabled::~AdaptersDisabled() {
  for (Linear* linear : adapted_) linear->set_lora_enabled(true);
}

}  // namespace megacpp::models
