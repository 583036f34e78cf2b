#include "settings/fsdp2_config_yaml.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace megacpp::settings {
namespace {

const char* const kMindSpeedKeys =
    "sharding_size, sub_modules_to_wrap, ignored_modules, recompute_modules, reshard_after_forward, param_dtype, "
    "reduce_dtype, output_dtype, cast_forward_inputs, num_to_forward_prefetch, num_to_backward_prefetch, offload_to_cpu, "
    "pin_memory, use_reentrant, align_fsdp_param_groups, expert_parallel_size, reshard_local_experts, moe_modules";
const char* const kRollKeys =
    "fsdp_size, param_dtype, reduce_dtype, reshard_after_forward, offload_policy, wrap_policy, apply_expert_patch, "
    "apply_tiled_mlp, tiled_num_shards, async_save_ckpt, ulysses_size";
const char* const kWrapPolicyKeys = "transformer_layer_cls_to_wrap, wrap_embeddings, wrap_lm_output, moe_experts";

// Keys only ROLL spells: one of them (or the strategy_config nesting) makes a file ROLL-style.
const std::set<std::string> kRollOnlyKeys = {"fsdp_size",        "offload_policy",  "wrap_policy",
                                             "apply_expert_patch", "apply_tiled_mlp", "tiled_num_shards",
                                             "async_save_ckpt",  "ulysses_size"};

// "FILE:LINE" of `node`, or "FILE" for a node the file does not have.
std::string where(const std::string& source, const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) return source;
  return source + ":" + std::to_string(node.Mark().line + 1);
}

// "FILE:LINE: key 'KEY': WHAT", the line being that of `node`.
[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& key, const std::string& what) {
  throw std::invalid_argument(where(source, node) + ": key '" + key + "': " + what);
}

// A ROLL key megacpp reads but does not implement, set to something other than its default.
[[noreturn]] void not_supported(const std::string& source, const YAML::Node& node, const std::string& key,
                                const std::string& missing, const std::string& accepted) {
  fail(source, node, key, "not supported in megacpp (" + missing + "); remove it or set it to " + accepted);
}

const char* node_kind(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

template <class T>
T scalar(const YAML::Node& node, const std::string& source, const std::string& key, const char* type) {
  if (!node.IsScalar()) fail(source, node, key, std::string("expected ") + type + ", got " + node_kind(node));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(source, node, key, std::string("expected ") + type + ", got '" + node.Scalar() + "'");
  }
}

// The keys of mapping `node` in order, each once: a key given twice is an error (yaml-cpp would
// keep both, and the later one would silently win). `prefix` is how they are named in errors.
struct MappingItem {
  std::string name;
  YAML::Node key, value;
};
std::vector<MappingItem> mapping_items(const YAML::Node& node, const std::string& source, const std::string& prefix) {
  std::vector<MappingItem> items;
  std::map<std::string, YAML::Node> first_seen;
  for (const auto& item : node) {
    if (!item.first.IsScalar()) fail(source, item.first, prefix + "?", "a key must be a name, not " + std::string(node_kind(item.first)));
    const std::string key = item.first.Scalar();
    auto [previous, inserted] = first_seen.emplace(key, item.first);
    if (!inserted) fail(source, item.first, prefix + key, "given twice (first at " + where(source, previous->second) + "); keep one");
    items.push_back({key, item.first, item.second});
  }
  return items;
}

// A boolean; `null` gives `if_null`.
bool flag(const YAML::Node& node, const std::string& source, const std::string& key, bool if_null) {
  return node.IsNull() ? if_null : scalar<bool>(node, source, key, "true or false");
}

std::vector<std::string> string_list(const YAML::Node& node, const std::string& source, const std::string& key,
                                     const char* item = "a module pattern") {
  if (node.IsNull()) return {};
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) fail(source, node, key, std::string("expected a list of ") + item + "s, got " + node_kind(node));
  std::vector<std::string> out;
  for (const auto& element : node) out.push_back(scalar<std::string>(element, source, key, item));
  return out;
}

c10::optional<c10::ScalarType> optional_dtype(const YAML::Node& node, const std::string& source, const std::string& key) {
  if (node.IsNull()) return c10::nullopt;
  const std::string text = scalar<std::string>(node, source, key, "a dtype");
  try {
    return parse_dtype(text, key);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where(source, node) + ": " + e.what());
  }
}

// A whole number >= 1; `null` gives `if_null`.
int positive(const YAML::Node& node, const std::string& source, const std::string& key, int if_null) {
  const int value = node.IsNull() ? if_null : scalar<int>(node, source, key, "an integer");
  if (value < 1) fail(source, node, key, "must be >= 1");
  return value;
}

// ROLL's model_args (beside strategy_args): freeze_module_prefix, a comma-separated string (as
// ROLL splits it) or a list; ulysses_size (its node kept in `ulysses`, to compare with
// strategy_config's).
void read_model_args(const YAML::Node& node, const std::string& source, FSDP2Config& c, YAML::Node& ulysses) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    fail(source, node, "model_args",
         "expected a mapping, got " + (node.IsScalar() ? "'" + node.Scalar() + "'" : std::string(node_kind(node))));
  }
  for (const auto& [name, key_node, v] : mapping_items(node, source, "model_args.")) {
    if (name == "ulysses_size") {
      c.ulysses_size = positive(v, source, "model_args.ulysses_size", 1);
      ulysses = key_node;
      continue;
    }
    if (name != "freeze_module_prefix") {
      fail(source, key_node, "model_args." + name, "unknown key (megacpp reads freeze_module_prefix and ulysses_size from "
                                                   "model_args; the model itself comes from the flags)");
    }
    for (const std::string& entry : string_list(v, source, "model_args.freeze_module_prefix", "a prefix string")) {
      std::stringstream parts(entry);
      for (std::string prefix; std::getline(parts, prefix, ',');) {
        const size_t begin = prefix.find_first_not_of(' '), end = prefix.find_last_not_of(' ');
        if (begin != std::string::npos) c.freeze_module_prefix.push_back(prefix.substr(begin, end - begin + 1));
      }
    }
  }
}

// cast_forward_inputs: true | false, or per wrapped module class {default: true, CLIPEncoderLayer: false}.
void read_cast_forward_inputs(const YAML::Node& node, const std::string& source, const std::string& key, FSDP2Config& c) {
  if (!node.IsMap()) {
    c.sharding.cast_forward_inputs =
        scalar<bool>(node, source, key, "true or false, or a mapping of module classes to true or false");
    return;
  }
  for (const auto& item : mapping_items(node, source, key + ".")) {
    const bool value = scalar<bool>(item.value, source, key + "." + item.name, "true or false");
    if (item.name == "default") {
      c.sharding.cast_forward_inputs = value;
    } else {
      c.sharding.cast_forward_inputs_by_class[item.name] = value;
    }
  }
}

int non_negative(const YAML::Node& node, const std::string& source, const std::string& key) {
  int value = scalar<int>(node, source, key, "an integer");
  if (value < 0) fail(source, node, key, "must be >= 0");
  return value;
}

// The `strategy_config` mapping of ROLL's `strategy_args` ({strategy_name, strategy_config});
// `prefix` is how keys of `node` are named in errors ("" or "strategy_args.").
YAML::Node strategy_config_of(const YAML::Node& node, const std::string& source, const std::string& prefix) {
  YAML::Node config;
  bool found = false;
  for (const auto& [key, key_node, value] : mapping_items(node, source, prefix)) {
    if (key == "strategy_name") {
      const std::string name = scalar<std::string>(value, source, prefix + key, "a strategy name");
      if (name != "fsdp2_train" && name != "fsdp2_infer") {
        fail(source, value, prefix + key, "megacpp reads FSDP2 strategies only (fsdp2_train or fsdp2_infer), got '" + name + "'");
      }
    } else if (key == "strategy_config") {
      config = value;
      found = true;
    } else if (key == "model_args" && prefix.empty()) {
      continue;  // ROLL's model_args beside a top-level strategy_config: read_model_args
    } else {
      fail(source, key_node, prefix + key, "not allowed beside strategy_config (ROLL's layout is strategy_args: "
                                        "{strategy_name, strategy_config}); put the key under strategy_config");
    }
  }
  if (!found) fail(source, node, prefix + "strategy_config", "missing (ROLL's strategy_args holds its FSDP2 keys there)");
  if (!config.IsNull() && !config.IsMap()) {
    fail(source, config, prefix + "strategy_config", std::string("expected a mapping of fsdp2 keys, got ") + node_kind(config));
  }
  return config;
}

// ROLL's wrap_policy mapping.
void read_wrap_policy(const YAML::Node& node, const std::string& source, const std::string& prefix,
                      FSDP2Config& c, bool& classes_given) {
  if (node.IsNull()) return;
  if (!node.IsMap()) fail(source, node, prefix, "expected a mapping (" + std::string(kWrapPolicyKeys) + ")");
  for (const auto& [name, key_node, v] : mapping_items(node, source, prefix + ".")) {
    const std::string key = prefix + "." + name;
    if (name == "transformer_layer_cls_to_wrap") {
      c.wrap.module_classes_to_wrap = string_list(v, source, key, "class name");
      if (c.wrap.module_classes_to_wrap.empty()) {
        fail(source, v, key, "expected a non-empty list of class names (e.g. [LlamaDecoderLayer]); remove the key to "
                          "wrap the model's decoder layers");
      }
      classes_given = true;
    } else if (name == "wrap_embeddings") {
      c.wrap.wrap_embeddings = flag(v, source, key, false);
    } else if (name == "wrap_lm_output") {
      c.wrap.wrap_lm_output = flag(v, source, key, false);
    } else if (name == "moe_experts") {
      c.wrap.expert_classes_to_wrap = string_list(v, source, key, "class name");
    } else {
      fail(source, key_node, key, "unknown key (known: " + std::string(kWrapPolicyKeys) + ")");
    }
  }
}

}  // namespace

c10::ScalarType parse_dtype(const std::string& text, const std::string& key) {
  std::string t = text.rfind("torch.", 0) == 0 ? text.substr(6) : text;
  if (t == "bf16" || t == "bfloat16") return c10::kBFloat16;
  if (t == "fp32" || t == "float32" || t == "float") return c10::kFloat;
  if (t == "fp16" || t == "float16" || t == "half") return c10::kHalf;
  throw std::invalid_argument("key '" + key + "': unknown dtype '" + text + "' (use bf16, fp16 or fp32)");
}

FSDP2Config parse_fsdp2_config(const std::string& yaml_text, const std::string& source,
                               const FSDP2Config& defaults) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": not valid YAML: " + e.what());
  }
  // A second document ('---') would be ignored: refuse it rather than guess which one is meant.
  for (size_t i = 1; i < documents.size(); ++i) {
    if (!documents[i].IsNull()) {
      throw std::invalid_argument(where(source, documents[i]) + ": a second YAML document ('---'); an fsdp2 config is one mapping");
    }
  }
  const YAML::Node root = documents.empty() ? YAML::Node() : documents.front();
  FSDP2Config c = defaults;
  if (root.IsNull()) return c;
  if (!root.IsMap()) {
    throw std::invalid_argument(where(source, root) + ": expected a mapping of fsdp2 keys, got " +
                                (root.IsSequence() ? std::string("a list") : "'" + root.Scalar() + "'"));
  }

  // ROLL's nesting: strategy_args: {strategy_name, strategy_config: {...}}, or strategy_config
  // (with an optional strategy_name) at the top.
  YAML::Node body = root;
  std::string prefix;
  bool roll_style = false;
  const auto root_items = mapping_items(root, source, "");
  YAML::Node model_args_ulysses;
  for (const auto& [key, key_node, value] : root_items) {
    if (key == "model_args") read_model_args(value, source, c, model_args_ulysses);
  }
  for (const auto& [key, key_node, value] : root_items) {
    if (key == "strategy_args") {
      for (const auto& other : root_items) {
        if (other.name != key && other.name != "model_args") {
          fail(source, other.key, other.name, "not allowed beside strategy_args; put it under strategy_args.strategy_config");
        }
      }
      if (!value.IsMap()) fail(source, value, key, "expected a mapping with strategy_name and strategy_config");
      body.reset(strategy_config_of(value, source, "strategy_args."));
      prefix = "strategy_args.strategy_config.";
      roll_style = true;
    } else if (key == "strategy_config") {
      body.reset(strategy_config_of(root, source, ""));
      prefix = "strategy_config.";
      roll_style = true;
    }
    if (roll_style) break;
  }

  std::map<std::string, YAML::Node> seen;  // name -> its key node
  bool classes_given = false;
  if (!body.IsNull()) {
    for (const auto& [name, key_node, v] : mapping_items(body, source, prefix)) {
      const std::string key = prefix + name;
      seen.emplace(name, key_node);
      if (kRollOnlyKeys.count(name)) roll_style = true;
      // MindSpeed's keys (ROLL shares param_dtype, reduce_dtype and reshard_after_forward).
      if (name == "model_args" && prefix.empty()) {
        continue;  // read above
      } else if (name == "sharding_size" || name == "fsdp_size") {
        // MindSpeed's "auto": every rank, as megacpp's -1.
        const bool automatic = v.IsScalar() && v.Scalar() == "auto";
        c.sharding_size = v.IsNull() || automatic ? -1 : scalar<int>(v, source, key, "an integer or auto");
      } else if (name == "sub_modules_to_wrap") {
        c.wrap.sub_modules_to_wrap = string_list(v, source, key);
      } else if (name == "ignored_modules") {
        c.wrap.ignored_modules = string_list(v, source, key);
      } else if (name == "recompute_modules") {
        c.recompute.recompute_modules = string_list(v, source, key);
      } else if (name == "reshard_after_forward") {
        int ranks = 0;
        if (v.IsScalar() && YAML::convert<int>::decode(v, ranks)) {
          fail(source, v, key, "an integer (reshard to " + std::to_string(ranks) + " ranks after forward) is not supported: "
                               "megacpp reshards to the whole group (true) or keeps the parameters gathered (false)");
        }
        c.sharding.reshard_after_forward = flag(v, source, key, true);  // null: FSDP2's default
      } else if (name == "param_dtype") {
        c.sharding.param_dtype = optional_dtype(v, source, key);
      } else if (name == "reduce_dtype") {
        c.sharding.reduce_dtype = optional_dtype(v, source, key);
      } else if (name == "output_dtype") {
        c.sharding.output_dtype = optional_dtype(v, source, key);
      } else if (name == "cast_forward_inputs") {
        read_cast_forward_inputs(v, source, key, c);
      } else if (name == "num_to_forward_prefetch") {
        c.sharding.num_to_forward_prefetch = non_negative(v, source, key);
      } else if (name == "num_to_backward_prefetch") {
        c.sharding.num_to_backward_prefetch = non_negative(v, source, key);
      } else if (name == "offload_to_cpu" || name == "offload_policy") {  // MindSpeed's and ROLL's
        c.sharding.offload_to_cpu = c.sharding.offload_to_cpu || flag(v, source, key, false);
      } else if (name == "pin_memory") {
        c.sharding.pin_memory = flag(v, source, key, true);  // only matters with offload
      } else if (name == "use_reentrant") {
        flag(v, source, key, true);  // megacpp's recompute has one form; both give the same gradients
      } else if (name == "align_fsdp_param_groups") {
        if (flag(v, source, key, false)) {
          not_supported(source, key_node, key, "groups are the modules sub_modules_to_wrap names, as they are", "false");
        }
      } else if (name == "expert_parallel_size") {
        if ((v.IsNull() ? 1 : scalar<int>(v, source, key, "an integer")) != 1) {
          not_supported(source, key_node, key, "no expert parallelism: every rank holds every expert (FSDP2 shards them)", "1");
        }
      } else if (name == "reshard_local_experts") {
        flag(v, source, key, true);  // only matters with experts
      } else if (name == "moe_modules") {
        if (!string_list(v, source, key).empty()) {
          not_supported(source, key_node, key,
                        "no expert parallelism; wrap each expert with sub_modules_to_wrap: ['layers.{*}.mlp.experts.{*}'] "
                        "and apply_expert_patch: true",
                        "[] or null");
        }
      } else if (name == "wrap_policy") {  // ROLL's strategy_config keys from here on
        read_wrap_policy(v, source, key, c, classes_given);
      } else if (name == "apply_expert_patch") {
        c.wrap.apply_expert_patch = flag(v, source, key, false);
      } else if (name == "apply_tiled_mlp") {
        c.tiled_mlp.apply_tiled_mlp = flag(v, source, key, false);
      } else if (name == "tiled_num_shards") {
        c.tiled_mlp.tiled_num_shards = positive(v, source, key, 4);
      } else if (name == "async_save_ckpt") {
        c.async_save_ckpt = flag(v, source, key, false);
      } else if (name == "ulysses_size") {
        const int size = positive(v, source, key, 1);
        if (!model_args_ulysses.IsNull() && size != c.ulysses_size) {
          fail(source, key_node, key, "is " + std::to_string(size) + " but model_args.ulysses_size (" +
                                          where(source, model_args_ulysses) + ") is " + std::to_string(c.ulysses_size) +
                                          "; keep one of them");
        }
        c.ulysses_size = size;
      } else {
        fail(source, key_node, key, "unknown key (MindSpeed keys: " + std::string(kMindSpeedKeys) +
                              "; ROLL strategy_config keys: " + std::string(kRollKeys) +
                              "; ROLL's model_args.freeze_module_prefix goes under model_args)");
      }
    }
  }

  // One setting spelled both ways.
  struct Twin {
    const char *mindspeed, *roll, *what;
  };
  for (const Twin& t : {Twin{"sharding_size", "fsdp_size", "the sharding group size"},
                        Twin{"sub_modules_to_wrap", "wrap_policy", "which modules are wrapped"}}) {
    if (seen.count(t.mindspeed) && seen.count(t.roll)) {
      fail(source, seen.at(t.roll), prefix + t.roll,
           std::string("also given as '") + prefix + t.mindspeed + "': both set " + t.what +
               " (MindSpeed's and ROLL's spellings); keep one of them");
    }
  }
  // ROLL wraps the model's decoder layer classes (Hugging Face's _no_split_modules) unless
  // wrap_policy names the classes.
  if (roll_style && !classes_given && !seen.count("sub_modules_to_wrap")) c.wrap.wrap_default_module_classes = true;
  return c;
}

FSDP2Config load_fsdp2_config(const std::string& path, const FSDP2Config& defaults) {
  // An ifstream opens a directory and reads it as empty: the defaults would go on silently.
  if (std::filesystem::is_directory(path)) {
    throw std::invalid_argument("--fsdp2-config-path: '" + path + "' is a directory; give the YAML file");
  }
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--fsdp2-config-path: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_fsdp2_config(text.str(), path, defaults);
}

}  // namespace megacpp::settings
