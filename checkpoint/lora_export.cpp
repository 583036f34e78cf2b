#include "checkpoint/lora_export.h"

#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "checkpoint/model_args.h"
#include "checkpoint/tensor_convert.h"
#include "models/layers/linear.h"
#include "models/registry.h"
#include "parallel/module.h"
#include "io/serialization/safetensors.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

// A model of `config` on the meta device (no memory) with the adapters `settings` give it, and the
// paths of the Linears they adapt.
struct AdaptedModel {
  std::shared_ptr<models::LanguageModel> model;
  std::vector<std::string> modules;
};

AdaptedModel adapted_model(const models::ModelConfig& config, const models::LoraSettings& settings) {
  AdaptedModel adapted{models::create_model(config, at::TensorOptions().dtype(at::kFloat).device(at::kMeta)), {}};
  adapted.modules = models::apply_lora(*adapted.model, settings);
  return adapted;
}

// An adapter factor (megacpp name), checked against the shape the settings give it.
at::Tensor read_factor(const CheckpointReader& reader, const std::string& fqn, const std::vector<int64_t>& shape) {
  const std::string key = reader.format().model_key(fqn);
  if (!reader.tensors().has(key)) throw std::runtime_error(reader.dir() + ": no LoRA adapter '" + fqn + "' (key '" + key + "')");
  at::Tensor t = reader.tensors().read_tensor(key);
  if (t.sizes().vec() != shape) {
    throw std::runtime_error(reader.dir() + ": '" + fqn + "' has shape " + io::serialization::shape_string(t.sizes().vec()) +
                             " but its args' LoRA settings give " + io::serialization::shape_string(shape));
  }
  return t.to(at::kFloat);
}

// The Hugging Face module a Linear's weight name belongs to ("x.weight" -> "x").
std::string hf_module(const models::HfTensorName& hf, const std::string& path) {
  const std::string suffix = ".weight";
  if (hf.offset != 0.0 || hf.name.size() <= suffix.size() || hf.name.compare(hf.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    throw std::runtime_error("'" + path + "' is no Linear of the Hugging Face model ('" + hf.name + "'); PEFT cannot name its adapter");
  }
  return hf.name.substr(0, hf.name.size() - suffix.size());
}

struct Adapter {
  std::string module;  // megacpp's module path
  at::Tensor down, up;  // lora_A [rank, in], lora_B [out, rank]
};

// The adapters' factors, each checked against the shape it has in `adapted`.
std::vector<Adapter> read_adapters(const CheckpointReader& reader, const AdaptedModel& adapted) {
  const auto shapes = adapted.model->named_parameters(true);
  auto factor = [&](const std::string& fqn) { return read_factor(reader, fqn, shapes[fqn].sizes().vec()); };
  std::vector<Adapter> out;
  for (const std::string& module : adapted.modules) {
    out.push_back({module, factor(module + ".lora_A.weight"), factor(module + ".lora_B.weight")});
  }
  return out;
}

// PEFT's target_modules for the adapted Hugging Face modules: a module's last name where every
// Linear of that name is adapted (PEFT adapts each module whose name ends with ".name"), else the
// adapted modules' full names.
std::vector<std::string> peft_targets(const models::ModelConfig& config, const AdaptedModel& model,
                                      const std::set<std::string>& adapted) {
  const models::ModelFamily& family = models::model_family(config.model_type());
  std::map<std::string, std::set<std::string>> linears_named;  // last name -> HF modules
  for (auto& [path, module] : parallel::named_hookable_modules(*model.model)) {
    // The model's own Linears, not the adapters' factors (LoraDown / LoraUp are Linears too).
    if (dynamic_cast<models::Linear*>(module) == nullptr || models::is_lora_parameter(path + ".weight")) continue;
    const std::string hf = hf_module(family.to_hf_tensor(config, path + ".weight"), path);
    linears_named[hf.substr(hf.rfind('.') + 1)].insert(hf);
  }
  std::map<std::string, std::set<std::string>> adapted_named;
  for (const std::string& hf : adapted) adapted_named[hf.substr(hf.rfind('.') + 1)].insert(hf);
  std::set<std::string> targets;
  for (const auto& [name, modules] : adapted_named) {
    if (modules == linears_named[name]) {
      targets.insert(name);
    } else {
      targets.insert(modules.begin(), modules.end());
    }
  }
  return {targets.begin(), targets.end()};
}

nlohmann::json number(double v) {
  return v == static_cast<double>(static_cast<int64_t>(v)) ? nlohmann::json(static_cast<int64_t>(v)) : nlohmann::json(v);
}

}  // namespace

models::LoraSettings checkpoint_lora(const CheckpointReader& reader) {
  if (!reader.has_object("args")) return {};
  return models::lora_settings_from_args(args_json(reader.object("args")), reader.dir());
}

std::string export_peft(const CheckpointReader& adapters, const models::ModelConfig& config, const models::LoraSettings& settings,
                        const std::string& output, at::ScalarType dtype, const std::string& base_model) {
  const models::ModelFamily& family = models::model_family(config.model_type());
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // PEFT name, values (alive while writing)
  std::set<std::string> adapted;
  bool fan_in_fan_out = false;
  const AdaptedModel model = adapted_model(config, settings);
  for (const Adapter& a : read_adapters(adapters, model)) {
    const models::HfTensorName hf = family.to_hf_tensor(config, a.module + ".weight");
    const std::string module = hf_module(hf, a.module);
    adapted.insert(module);
    fan_in_fan_out = fan_in_fan_out || hf.transposed;  // Conv1D (GPT-2): PEFT's fan_in_fan_out
    tensors.emplace_back("base_model.model." + module + ".lora_A.weight", a.down.to(dtype).contiguous());
    tensors.emplace_back("base_model.model." + module + ".lora_B.weight", a.up.to(dtype).contiguous());
  }
  std::map<std::string, io::serialization::TensorView> views;
  for (const auto& [name, t] : tensors) views.emplace(name, safetensors_view(t));
  fs::create_directories(output);
  io::serialization::write_safetensors((fs::path(output) / "adapter_model.safetensors").string(), views,
                                   io::serialization::SafetensorsMetadata{{"format", "pt"}});
  const nlohmann::json config_json = {
      {"alpha_pattern", nlohmann::json::object()}, {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model)},
      {"bias", "none"}, {"fan_in_fan_out", fan_in_fan_out}, {"inference_mode", true}, {"init_lora_weights", true},
      {"layer_replication", nullptr}, {"layers_pattern", nullptr}, {"layers_to_transform", nullptr},
      {"loftq_config", nlohmann::json::object()}, {"lora_alpha", number(settings.alpha)}, {"lora_dropout", settings.dropout},
      {"megatron_config", nullptr}, {"megatron_core", "megatron.core"}, {"modules_to_save", nullptr}, {"peft_type", "LORA"},
      {"r", settings.rank}, {"rank_pattern", nlohmann::json::object()}, {"revision", nullptr},
      {"target_modules", peft_targets(config, model, adapted)}, {"task_type", "CAUSAL_LM"},
      {"use_dora", false}, {"use_rslora", false}};
  io::serialization::write_file_atomically((fs::path(output) / "adapter_config.json").string(), config_json.dump(2) + "\n");
  std::ostringstream summary;
  summary << "exported " << tensors.size() / 2 << " LoRA adapters (rank " << settings.rank << ", " << c10::toString(dtype)
          << ") from " << adapters.dir() << " to " << output << " as a PEFT folder";
  return summary.str();
}

void merge_lora(std::map<std::string, at::Tensor>& weights, const CheckpointReader& adapters, const models::ModelConfig& config,
                const models::LoraSettings& settings) {
  const double scaling = settings.alpha / static_cast<double>(settings.rank);
  for (const Adapter& a : read_adapters(adapters, adapted_model(config, settings))) {
    at::Tensor& w = weights.at(a.module + ".weight");
    w = w.to(at::kFloat) + at::matmul(a.up, a.down) * scaling;
  }
}

}  // namespace megacpp::checkpoint
