#include "models/registry.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "parallel/module.h"

namespace megacpp::models {
namespace {

std::map<std::string, std::shared_ptr<const ModelFamily>>& families() {
  static std::map<std::string, std::shared_ptr<const ModelFamily>> map;
  return map;
}

// Errors of registrations made while a library was being loaded.
std::vector<std::string>& load_errors() {
  static std::vector<std::string> errors;
  return errors;
}

void throw_load_errors(const std::string& context) {
  if (load_errors().empty()) return;
  std::string message = context;
  for (const auto& e : load_errors()) message += (message.empty() ? "" : ": ") + e;
  load_errors().clear();
  throw std::invalid_argument(message);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void register_family(std::shared_ptr<const ModelFamily> family) {
  const std::string name = family->name();
  if (!families().emplace(name, std::move(family)).second) {
    throw std::invalid_argument("model family '" + name + "' is registered twice");
  }
}

std::vector<const ModelFamily*> registered_families() {
  std::vector<const ModelFamily*> out;
  for (auto& [name, family] : families()) out.push_back(family.get());
  return out;
}

const ModelFamily& model_family(const std::string& name) {
  throw_load_errors("");
  auto it = families().find(name);
  if (it == families().end()) {
    std::vector<std::string> known;
    for (auto& [n, f] : families()) known.push_back(n);
    throw std::invalid_argument("--model-type '" + name + "' is not registered (known: " + joined(known) +
                                "; a model built outside megacpp is added with --model-library)");
  }
  return *it->second;
}

const ModelFamily& family_for_hf_model_type(const std::string& hf_model_type, const std::string& path,
                                            const std::string& chosen) {
  std::vector<std::string> known, readers;
  for (auto& [name, family] : families()) {
    if (!chosen.empty() && name != chosen) continue;
    for (const auto& type : family->hf_model_types()) {
      if (type == hf_model_type) readers.push_back(name);
      known.push_back("\"" + type + "\"");
    }
  }
  const std::string key = path + ": key 'model_type': \"" + hf_model_type + "\": ";
  if (!chosen.empty() && readers.empty()) {
    model_family(chosen);  // an unknown name: the known ones
    throw std::invalid_argument(key + "--model-type " + chosen + " reads " + joined(known));
  }
  if (readers.empty()) throw std::invalid_argument(key + "megacpp reads " + joined(known));
  if (readers.size() > 1) {
    throw std::invalid_argument(key + "read by --model-type " + joined(readers) + ": give --model-type to choose");
  }
  return model_family(readers.front());
}

std::shared_ptr<LanguageModel> create_model(const ModelConfig& config, const at::TensorOptions& options) {
  std::shared_ptr<LanguageModel> model = model_family(config.model_type()).build(config, options);
  // On one rank as on many: a parameter FSDP could not reach fails here, not only when sharded.
  parallel::require_parameters_in_slots(*model);
  return model;
}

void load_model_library(const std::string& path) {
  static std::set<std::string> loaded;
  const std::string key = std::filesystem::weakly_canonical(path).string();
  if (loaded.count(key)) return;
  const std::string where = "--model-library " + path;
  if (!std::filesystem::is_regular_file(path)) throw std::invalid_argument(where + ": no such file");
  const size_t before = families().size();
  // RTLD_GLOBAL: a library's own dependencies may be shared with later ones.
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) throw std::invalid_argument(where + ": " + dlerror());
  loaded.insert(key);
  throw_load_errors(where);
  if (families().size() == before) {
    throw std::invalid_argument(where + ": registers no model family (MEGACPP_REGISTER_MODEL_FAMILY in one of its .cpp files)");
  }
}

namespace detail {

bool register_family_at_load(std::shared_ptr<const ModelFamily> family) noexcept {
  try {
    register_family(std::move(family));
    return true;
  } catch (const std::exception& e) {
    load_errors().push_back(e.what());
    return false;
  }
}

}  // namespace detail
}  // namespace megacpp::models
