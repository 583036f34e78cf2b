#include "settings/hf_model_arguments.h"

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "checkpoint/hf_folder.h"
#include "models/registry.h"
#include "settings/flag_section.h"
#include "settings/model_arguments.h"

namespace megacpp::settings {
namespace {

using nlohmann::json;

// MindSpeed-LLM's --model-id values and the config.json model_type each stands for; the ids of
// models megacpp does not build, with the reason.
const std::map<std::string, std::string>& model_ids() {
  static const std::map<std::string, std::string> ids{
      {"llama", "llama"}, {"mistral", "mistral"}, {"qwen2", "qwen2"}, {"qwen2.5", "qwen2"}, {"qwen3", "qwen3"}, {"qwen3_moe", "qwen3_moe"}};
  return ids;
}
const std::map<std::string, std::string>& refused_model_ids() {
  static const std::map<std::string, std::string> ids{
      {"gpt_oss", "GPT-OSS (attention sinks, alternating sliding windows, biased experts) is not a model megacpp builds"},
      {"qwen3_next", "Qwen3-Next (gated delta-net linear attention) is not a model megacpp builds"}};
  return ids;
}

// The config.json model_type --model-id stands for; throws naming the flag.
std::string model_type_of_id(const std::string& id) {
  if (const auto it = model_ids().find(id); it != model_ids().end()) return it->second;
  if (const auto it = refused_model_ids().find(id); it != refused_model_ids().end()) {
    throw std::invalid_argument("--model-id " + id + ": " + it->second);
  }
  std::string known;
  for (const auto& [name, type] : model_ids()) known += (known.empty() ? "" : ", ") + name;
  throw std::invalid_argument("--model-id " + id + ": not one of " + known);
}

// A family's to_flags() text as flag -> value ("true" for a switch).
std::map<std::string, std::string> flag_values_of(const std::string& text) {
  const std::vector<std::string> words = split_words(text);
  std::map<std::string, std::string> values;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) != 0) throw std::logic_error("to_flags() gave '" + text + "': '" + words[i] + "' is no flag");
    const std::string flag = words[i].substr(2);
    const bool has_value = i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0;
    values[flag] = has_value ? words[++i] : "true";
  }
  return values;
}

// Equal as a checkpoint's args compare them, floating-point values to printing precision
// (to_flags writes them with 6 significant digits).
bool same_value(const json& a, const json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-5 * std::max(std::abs(x), std::abs(y));
  }
  return a == b;
}

}  // namespace

std::vector<std::string> with_hf_folder_of_load(std::vector<std::string> words, std::vector<std::string>& notes) {
  std::string load;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "--init-from-hf-path" || words[i].rfind("--init-from-hf-path=", 0) == 0) return words;
    if (words[i] == "--load" && i + 1 < words.size()) load = words[i + 1];
    if (words[i].rfind("--load=", 0) == 0) load = words[i].substr(7);
  }
  if (load.empty() || !checkpoint::is_hf_folder(load)) return words;
  words.insert(words.end(), {"--init-from-hf-path", load});
  notes.push_back("--load " + load + " is a Hugging Face folder: its model, from its weights unless it holds a checkpoint "
                  "(as --init-from-hf-path " + load + ")");
  return words;
}

std::optional<std::string> hf_folder_model_type(const cxxopts::ParseResult& r) {
  const std::string dir = r["init-from-hf-path"].as<std::string>();
  if (dir.empty()) {
    if (r.count("model-id")) {
      throw std::invalid_argument("--model-id names the model of --init-from-hf-path's folder (MindSpeed-LLM's FSDP2 "
                                  "trainer); without a folder give --model-type and the model flags");
    }
    return std::nullopt;
  }
  const std::string path = checkpoint::hf_config_path(dir);
  const json config = checkpoint::read_hf_config(dir);
  const std::string chosen = r.count("model-type") ? r["model-type"].as<std::string>() : "";
  const models::ModelFamily& family = checkpoint::family_of_hf_config(config, path, chosen);
  if (r.count("model-id")) {
    const std::string id = r["model-id"].as<std::string>();
    const std::string type = model_type_of_id(id);
    if (config["model_type"] != type) {
      throw std::invalid_argument("--model-id " + id + " is model_type \"" + type + "\", but " + path + ": key 'model_type': " +
                                  config["model_type"].dump());
    }
  }
  return family.name();
}

std::shared_ptr<const models::ModelConfig> hf_folder_model(const cxxopts::ParseResult& r, const std::string& model_type,
                                                           const std::string& dir, int64_t seq_length) {
  const std::string path = checkpoint::hf_config_path(dir);
  const models::ModelFamily& family = models::model_family(model_type);
  const auto folder = family.from_hf_config(checkpoint::read_hf_config(dir), path);
  const json folder_args = folder->to_args();
  const int64_t vocab = folder_args.value("padded_vocab_size", int64_t{0});
  // The flags given, the folder's for the others: the model the command line describes.
  const auto flags = model_config_from_flags(r, model_type, {vocab, seq_length}, flag_values_of(folder->to_flags()));
  const json flag_args = flags->to_args();
  json args = folder_args;
  std::string differences;
  for (const auto& [field, value] : flag_args.items()) {
    if (!folder->checkpoint_must_match(field)) {
      args[field] = value;  // changes no weight: the flag's value
    } else if (!folder_args.contains(field) || !same_value(value, folder_args[field])) {
      differences += "\n  " + flag_of_arg(field) + ": " + value.dump() + " by the flags given, " +
                     (folder_args.contains(field) ? folder_args[field].dump() : std::string("absent")) + " in " + path;
    }
  }
  if (!differences.empty()) {
    throw std::invalid_argument("--init-from-hf-path " + dir + ": the model flags describe another model than " + path +
                                " (leave them out, or make them agree):" + differences);
  }
  return family.config_from_args(args, path);
}

}  // namespace megacpp::settings
