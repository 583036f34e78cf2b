#include "megacpp/config/fsdp2_config_yaml.h"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace megacpp::config {
namespace {

const char* const kMindSpeedKeys =
    "sharding_size, sub_modules_to_wrap, ignored_modules, recompute_modules, reshard_after_forward, param_dtype, "
    "reduce_dtype, output_dtype, cast_forward_inputs, num_to_forward_prefetch, num_to_backward_prefetch";
const char* const kRollKeys =
    "fsdp_size, param_dtype, reduce_dtype, reshard_after_forward, offload_policy, wrap_policy, apply_expert_patch, "
    "apply_tiled_mlp, tiled_num_shards, async_save_ckpt, ulysses_size";
const char* const kWrapPolicyKeys = "transformer_layer_cls_to_wrap, wrap_embeddings, wrap_lm_output, moe_experts";

// Keys only ROLL spells: one of them (or the strategy_config nesting) makes a file ROLL-style.
const std::set<std::string> kRollOnlyKeys = {"fsdp_size",        "offload_policy",  "wrap_policy",
                                             "apply_expert_patch", "apply_tiled_mlp", "tiled_num_shards",
                                             "async_save_ckpt",  "ulysses_size"};

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw std::invalid_argument(source + ": key '" + key + "': " + what);
}

// A ROLL key megacpp reads but does not implement, set to something other than its default.
[[noreturn]] void not_supported(const std::string& source, const std::string& key, const std::string& missing,
                                const std::string& accepted) {
  fail(source, key, "not supported in megacpp (" + missing + "); remove it or set it to " + accepted);
}

template <class T>
T scalar(const YAML::Node& node, const std::string& source, const std::string& key, const char* type) {
  if (!node.IsScalar()) fail(source, key, std::string("expected ") + type);
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(source, key, std::string("expected ") + type + ", got '" + node.Scalar() + "'");
  }
}

// A boolean; `null` gives `if_null`.
bool flag(const YAML::Node& node, const std::string& source, const std::string& key, bool if_null) {
  return node.IsNull() ? if_null : scalar<bool>(node, source, key, "true or false");
}

std::vector<std::string> string_list(const YAML::Node& node, const std::string& source, const std::string& key,
                                     const char* item = "a module pattern") {
  if (node.IsNull()) return {};
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) fail(source, key, std::string("expected a list of ") + item + "s");
  std::vector<std::string> out;
  for (const auto& element : node) out.push_back(scalar<std::string>(element, source, key, item));
  return out;
}

c10::optional<c10::ScalarType> optional_dtype(const YAML::Node& node, const std::string& source, const std::string& key) {
  if (node.IsNull()) return c10::nullopt;
  try {
    return parse_dtype(scalar<std::string>(node, source, key, "a dtype"), key);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
}

int non_negative(const YAML::Node& node, const std::string& source, const std::string& key) {
  int value = scalar<int>(node, source, key, "an integer");
  if (value < 0) fail(source, key, "must be >= 0");
  return value;
}

// The `strategy_config` mapping of ROLL's `strategy_args` ({strategy_name, strategy_config});
// `prefix` is how keys of `node` are named in errors ("" or "strategy_args.").
YAML::Node strategy_config_of(const YAML::Node& node, const std::string& source, const std::string& prefix) {
  YAML::Node config;
  bool found = false;
  for (const auto& item : node) {
    const std::string key = item.first.as<std::string>();
    if (key == "strategy_name") {
      const std::string name = scalar<std::string>(item.second, source, prefix + key, "a strategy name");
      if (name != "fsdp2_train" && name != "fsdp2_infer") {
        fail(source, prefix + key, "megacpp reads FSDP2 strategies only (fsdp2_train or fsdp2_infer), got '" + name + "'");
      }
    } else if (key == "strategy_config") {
      config = item.second;
      found = true;
    } else {
      fail(source, prefix + key, "not allowed beside strategy_config (ROLL's layout is strategy_args: "
                                 "{strategy_name, strategy_config}); put the key under strategy_config");
    }
  }
  if (!found) fail(source, prefix + "strategy_config", "missing (ROLL's strategy_args holds its FSDP2 keys there)");
  if (!config.IsNull() && !config.IsMap()) fail(source, prefix + "strategy_config", "expected a mapping of fsdp2 keys");
  return config;
}

// ROLL's wrap_policy mapping.
void read_wrap_policy(const YAML::Node& node, const std::string& source, const std::string& prefix,
                      models::FSDP2Config& c, bool& classes_given) {
  if (node.IsNull()) return;
  if (!node.IsMap()) fail(source, prefix, "expected a mapping (" + std::string(kWrapPolicyKeys) + ")");
  for (const auto& item : node) {
    const std::string key = prefix + "." + item.first.as<std::string>();
    const std::string name = item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (name == "transformer_layer_cls_to_wrap") {
      c.module_classes_to_wrap = string_list(v, source, key, "class name");
      if (c.module_classes_to_wrap.empty()) {
        fail(source, key, "expected a non-empty list of class names (e.g. [LlamaDecoderLayer]); remove the key to "
                          "wrap the model's decoder layers");
      }
      classes_given = true;
    } else if (name == "wrap_embeddings") {
      c.wrap_embeddings = flag(v, source, key, false);
    } else if (name == "wrap_lm_output") {
      c.wrap_lm_output = flag(v, source, key, false);
    } else if (name == "moe_experts") {
      auto experts = string_list(v, source, key, "class name");
      if (!experts.empty()) not_supported(source, key, "megacpp has no MoE models or expert wrapping", "[] or null");
    } else {
      fail(source, key, "unknown key (known: " + std::string(kWrapPolicyKeys) + ")");
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

models::FSDP2Config parse_fsdp2_config(const std::string& yaml_text, const std::string& source,
                                       const models::FSDP2Config& defaults) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": not valid YAML: " + e.what());
  }
  models::FSDP2Config c = defaults;
  if (root.IsNull()) return c;
  if (!root.IsMap()) throw std::invalid_argument(source + ": expected a mapping of fsdp2 keys");

  // ROLL's nesting: strategy_args: {strategy_name, strategy_config: {...}}, or strategy_config
  // (with an optional strategy_name) at the top.
  YAML::Node body = root;
  std::string prefix;
  bool roll_style = false;
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    if (key == "strategy_args") {
      for (const auto& other : root) {
        const std::string other_key = other.first.as<std::string>();
        if (other_key != key) fail(source, other_key, "not allowed beside strategy_args; put it under strategy_args.strategy_config");
      }
      if (!item.second.IsMap()) fail(source, key, "expected a mapping with strategy_name and strategy_config");
      body.reset(strategy_config_of(item.second, source, "strategy_args."));
      prefix = "strategy_args.strategy_config.";
      roll_style = true;
    } else if (key == "strategy_config") {
      body.reset(strategy_config_of(root, source, ""));
      prefix = "strategy_config.";
      roll_style = true;
    }
    if (roll_style) break;
  }

  std::set<std::string> seen;
  bool classes_given = false;
  if (!body.IsNull()) {
    for (const auto& item : body) {
      const std::string name = item.first.as<std::string>();
      const std::string key = prefix + name;
      const YAML::Node& v = item.second;
      seen.insert(name);
      if (kRollOnlyKeys.count(name)) roll_style = true;
      // MindSpeed's keys (ROLL shares param_dtype, reduce_dtype and reshard_after_forward).
      if (name == "sharding_size" || name == "fsdp_size") {
        c.sharding_size = v.IsNull() ? -1 : scalar<int>(v, source, key, "an integer");
      } else if (name == "sub_modules_to_wrap") {
        c.sub_modules_to_wrap = string_list(v, source, key);
      } else if (name == "ignored_modules") {
        c.ignored_modules = string_list(v, source, key);
      } else if (name == "recompute_modules") {
        c.recompute_modules = string_list(v, source, key);
      } else if (name == "reshard_after_forward") {
        c.reshard_after_forward = flag(v, source, key, true);  // null: FSDP2's default
      } else if (name == "param_dtype") {
        c.param_dtype = optional_dtype(v, source, key);
      } else if (name == "reduce_dtype") {
        c.reduce_dtype = optional_dtype(v, source, key);
      } else if (name == "output_dtype") {
        c.output_dtype = optional_dtype(v, source, key);
      } else if (name == "cast_forward_inputs") {
        c.cast_forward_inputs = scalar<bool>(v, source, key, "true or false");
      } else if (name == "num_to_forward_prefetch") {
        c.num_to_forward_prefetch = non_negative(v, source, key);
      } else if (name == "num_to_backward_prefetch") {
        c.num_to_backward_prefetch = non_negative(v, source, key);
      } else if (name == "wrap_policy") {  // ROLL's strategy_config keys from here on
        read_wrap_policy(v, source, key, c, classes_given);
      } else if (name == "offload_policy") {
        if (flag(v, source, key, false)) not_supported(source, key, "no CPU offload of parameters", "false");
      } else if (name == "apply_expert_patch") {
        if (flag(v, source, key, false)) not_supported(source, key, "no MoE expert patch: megacpp has no MoE models", "false");
      } else if (name == "apply_tiled_mlp") {
        if (flag(v, source, key, false)) not_supported(source, key, "no TiledMLP", "false");
      } else if (name == "tiled_num_shards") {
        int shards = v.IsNull() ? 4 : scalar<int>(v, source, key, "an integer");
        if (shards != 1 && shards != 4) not_supported(source, key, "no TiledMLP", "1 or ROLL's default 4");
      } else if (name == "async_save_ckpt") {
        c.async_save_ckpt = flag(v, source, key, false);
      } else if (name == "ulysses_size") {
        int size = v.IsNull() ? 1 : scalar<int>(v, source, key, "an integer");
        if (size < 1) fail(source, key, "must be >= 1");
        if (size > 1) not_supported(source, key, "no Ulysses context parallelism", "1");
      } else {
        fail(source, key, "unknown key (MindSpeed keys: " + std::string(kMindSpeedKeys) +
                              "; ROLL strategy_config keys: " + std::string(kRollKeys) + ")");
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
      fail(source, prefix + t.roll,
           std::string("also given as '") + prefix + t.mindspeed + "': both set " + t.what +
               " (MindSpeed's and ROLL's spellings); keep one of them");
    }
  }
  // ROLL wraps the model's decoder layer classes (Hugging Face's _no_split_modules) unless
  // wrap_policy names the classes.
  if (roll_style && !classes_given && !seen.count("sub_modules_to_wrap")) c.wrap_default_module_classes = true;
  return c;
}

models::FSDP2Config load_fsdp2_config(const std::string& path, const models::FSDP2Config& defaults) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--fsdp2-config-path: cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_fsdp2_config(text.str(), path, defaults);
}

}  // namespace megacpp::config
