#include "settings/megatron_architecture.h"

#include <map>
#include <optional>
#include <stdexcept>

#include "models/registry.h"
#include "settings/hf_model_arguments.h"

namespace megacpp::settings {
namespace {

using Architecture = std::map<std::string, std::string>;

// Megatron's values when the flag is left out (megatron/training/arguments.py).
const Architecture& megatron_defaults() {
  static const Architecture defaults{{"position-embedding-type", "learned_absolute"},
                                     {"normalization", "LayerNorm"},
                                     {"swiglu", "false"},
                                     {"disable-bias-linear", "false"}};
  return defaults;
}

// How an architecture value reads on a command line.
std::string as_flags(const std::string& key, const std::string& value) {
  if (value == "true") return "--" + key;
  if (value == "false") return "no --" + key;
  return "--" + key + " " + value;
}

std::string describe(const Architecture& architecture) {
  std::string out;
  for (const auto& [key, value] : architecture) out += (out.empty() ? "" : ", ") + as_flags(key, value);
  return out;
}

// The architecture flags the command line gives, resolved as Megatron resolves them.
Architecture given_architecture(const cxxopts::ParseResult& r) {
  Architecture given;
  if (r.count("position-embedding-type")) given["position-embedding-type"] = r["position-embedding-type"].as<std::string>();
  if (r.count("use-rotary-position-embeddings")) {
    auto it = given.find("position-embedding-type");
    if (it != given.end() && it->second != "rope") {
      throw std::invalid_argument("--use-rotary-position-embeddings contradicts --position-embedding-type " + it->second);
    }
    given["position-embedding-type"] = "rope";
  }
  // Megatron: without a position embedding and without rope, there is no position information.
  if (r.count("no-position-embedding") && given["position-embedding-type"] != "rope") given["position-embedding-type"] = "none";
  if (r.count("normalization")) given["normalization"] = r["normalization"].as<std::string>();
  if (r.count("swiglu")) given["swiglu"] = "true";
  if (r.count("disable-bias-linear")) given["disable-bias-linear"] = "true";
  return given;
}

std::vector<std::string> disagreements(const Architecture& given, const Architecture& family) {
  std::vector<std::string> out;
  for (const auto& [key, value] : given) {
    auto it = family.find(key);
    if (it == family.end() || it->second != value) out.push_back(as_flags(key, value));
  }
  return out;
}

// A family that says which architecture it is must say all of it.
void require_complete(const models::ModelFamily& family) {
  const Architecture& architecture = family.megatron_architecture();
  for (const auto& [key, unused] : megatron_defaults()) {
    if (!architecture.empty() && !architecture.count(key)) {
      throw std::invalid_argument("model family '" + family.name() + "' declares its Megatron architecture without '" + key +
                                  "' (ModelFamily::megatron_architecture must give all four keys)");
    }
  }
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

[[noreturn]] void no_family(const Architecture& given) {
  std::string message = "the architecture flags (" + describe(given) + ") describe no model megacpp builds:";
  for (const auto* family : models::registered_families()) {
    if (!family->megatron_architecture().empty()) {
      message += "\n  --model-type " + family->name() + " computes " + describe(family->megatron_architecture());
    }
  }
  throw std::invalid_argument(message);
}

// The left-out flags whose Megatron default the family (complete: require_complete) computes
// differently.
std::vector<std::string> departures(const Architecture& given, const models::ModelFamily& family) {
  std::vector<std::string> notes;
  for (const auto& [key, megatron] : megatron_defaults()) {
    const std::string& computed = family.megatron_architecture().at(key);
    if (!given.count(key) && computed != megatron) {
      notes.push_back("--model-type " + family.name() + " (chosen by " + describe(given) + ") computes " +
                      as_flags(key, computed) + "; Megatron's default, with the flag left out, is " +
                      as_flags(key, megatron));
    }
  }
  return notes;
}

}  // namespace

void add_megatron_architecture_flags(cxxopts::Options& options) {
  options.add_options("Megatron's architecture flags (they choose the model family; Note [Megatron architecture])")
      ("position-embedding-type", "learned_absolute (Megatron's default) or rope",
       cxxopts::value<std::string>())
      ("use-rotary-position-embeddings", "--position-embedding-type rope")
      ("no-position-embedding", "no learned position table (with rope)")
      ("normalization", "LayerNorm (Megatron's default) or RMSNorm", cxxopts::value<std::string>())
      ("swiglu", "SwiGLU MLP; without it GeLU (Megatron's default)")
      ("disable-bias-linear", "no biases in the linear layers; without it biases (Megatron's default)");
}

bool is_megatron_architecture_flag(const std::string& flag) {
  for (const char* name : {"position-embedding-type", "use-rotary-position-embeddings", "no-position-embedding",
                           "normalization", "swiglu", "disable-bias-linear"}) {
    if (flag == name) return true;
  }
  return false;
}

ModelFamilyChoice choose_model_family(const cxxopts::ParseResult& r) {
  const Architecture given = given_architecture(r);
  // The family named, by --init-from-hf-path's config.json (Note [Hugging Face folders]) or
  // --model-type; the architecture flags given must describe it.
  const std::optional<std::string> folder_type = hf_folder_model_type(r);
  if (folder_type || r.count("model-type")) {
    const std::string type = folder_type ? *folder_type : r["model-type"].as<std::string>();
    const std::string named = folder_type ? "--init-from-hf-path's model (--model-type " + type + ")" : "--model-type " + type;
    const auto& architecture = models::model_family(type).megatron_architecture();
    const std::string reason = folder_type ? "--init-from-hf-path" : "--model-type";
    if (given.empty()) return {type, reason, {}};
    if (architecture.empty()) {
      throw std::invalid_argument(named + " does not read Megatron's architecture flags (" + describe(given) + ")");
    }
    const auto wrong = disagreements(given, architecture);
    if (!wrong.empty()) throw std::invalid_argument(named + " computes " + describe(architecture) + ", not " + join(wrong));
    return {type, reason, {}};
  }
  const std::string reason = "the family Megatron's architecture flags describe (" +
                             (given.empty() ? std::string("none given: Megatron's defaults") : describe(given)) +
                             "); --model-type names another";
  std::vector<const models::ModelFamily*> agreeing;
  for (const auto* family : models::registered_families()) {
    require_complete(*family);
    const auto& architecture = family->megatron_architecture();
    if (architecture.empty() || !disagreements(given, architecture).empty()) continue;
    Architecture full = megatron_defaults();
    for (const auto& [key, value] : given) full[key] = value;
    if (architecture == full) return {family->name(), reason, {}};
    agreeing.push_back(family);
  }
  if (agreeing.empty()) no_family(given);
  if (agreeing.size() > 1) {
    std::vector<std::string> names;
    for (const auto* family : agreeing) names.push_back("--model-type " + family->name());
    throw std::invalid_argument("the architecture flags (" + describe(given) + ") fit " + join(names) + ": choose one");
  }
  return {agreeing.front()->name(), reason, departures(given, *agreeing.front())};
}

}  // namespace megacpp::settings
