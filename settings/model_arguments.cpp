#include "settings/model_arguments.h"

#include <algorithm>

#include <map>
#include <set>
#include <stdexcept>

#include "models/registry.h"

namespace megacpp::settings {
namespace {

// Every model flag by name, with the families that declare it.
struct DeclaredFlag {
  models::ModelFlag flag;
  std::vector<std::string> families;
  std::vector<std::string> defaults;  // per family, for the help text
};

std::map<std::string, DeclaredFlag> declared_flags() {
  std::map<std::string, DeclaredFlag> out;
  for (const auto* family : models::registered_families()) {
    for (const auto& flag : family->flags()) {
      auto& declared = out.try_emplace(flag.name, DeclaredFlag{flag, {}, {}}).first->second;
      declared.families.push_back(family->name());
      declared.defaults.push_back(flag.default_value);
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// "hidden size (default 64; --model-type llama, gpt2)"; per-family defaults when they differ.
std::string help_text(const DeclaredFlag& d) {
  std::string defaults;
  if (!d.flag.is_switch) {
    bool same = true;
    for (const auto& v : d.defaults) same = same && v == d.defaults.front();
    if (same) {
      defaults = "default " + d.defaults.front();
    } else {
      std::vector<std::string> each;
      for (size_t i = 0; i < d.families.size(); ++i) each.push_back(d.defaults[i] + " for " + d.families[i]);
      defaults = "default " + join(each, ", ");
    }
    defaults += "; ";
  }
  return d.flag.help + " (" + defaults + "--model-type " + join(d.families, ", ") + ")";
}

}  // namespace

std::vector<std::string> model_libraries_in(int argc, const char* const* argv) {
  const std::string flag = "--model-library";
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == flag && i + 1 < argc) {
      paths.emplace_back(argv[++i]);
    } else if (word.rfind(flag + "=", 0) == 0) {
      paths.push_back(word.substr(flag.size() + 1));
    }
  }
  return paths;
}

void add_model_library_flag(cxxopts::Options& options, const std::string& group) {
  options.add_options(group)("model-library", "shared library that registers model families (loaded before the flags are read; may repeat)",
                             cxxopts::value<std::vector<std::string>>());
}

void add_model_flags(cxxopts::Options& options) {
  auto group = options.add_options("model");
  for (const auto& [name, declared] : declared_flags()) {
    if (declared.flag.is_switch) {
      group(name, help_text(declared));
    } else {
      group(name, help_text(declared), cxxopts::value<std::string>());
    }
  }
}

std::vector<std::string> model_flag_names() {
  std::vector<std::string> names;
  for (const auto& entry : declared_flags()) names.push_back(entry.first);
  return names;
}

std::string flag_of_arg(const std::string& field) {
  if (field == "padded_vocab_size") return "the padded vocabulary (--tokenizer-type, --vocab-size, --make-vocab-size-divisible-by)";
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::shared_ptr<const models::ModelConfig> model_config_from_flags(const cxxopts::ParseResult& parsed,
                                                                   const std::string& model_type,
                                                                   const models::ModelContext& context,
                                                                   const std::map<std::string, std::string>& fallback) {
  const models::ModelFamily& family = models::model_family(model_type);
  std::map<std::string, std::string> values;
  std::set<std::string> given_flags;
  for (const auto& flag : family.flags()) {
    const bool given = parsed.count(flag.name) > 0;
    const auto instead = fallback.find(flag.name);
    if (given || instead != fallback.end()) given_flags.insert(flag.name);
    if (given) {
      values[flag.name] = !flag.is_switch ? parsed[flag.name].as<std::string>() : parsed[flag.name].as<bool>() ? "true" : "false";
    } else {
      values[flag.name] = instead != fallback.end() ? instead->second : flag.is_switch ? "false" : flag.default_value;
    }
  }
  std::vector<std::string> foreign;
  for (const auto& [name, declared] : declared_flags()) {
    if (parsed.count(name) > 0 && !values.count(name)) {
      foreign.push_back("--" + name + " (read by --model-type " + join(declared.families, ", ") + ")");
    }
  }
  if (!foreign.empty()) {
    throw std::invalid_argument("--model-type " + model_type + " does not read " + join(foreign, ", "));
  }
  return family.config_from_flags(models::ModelFlagValues(std::move(values), std::move(given_flags)), context);
}

}  // namespace megacpp::settings
