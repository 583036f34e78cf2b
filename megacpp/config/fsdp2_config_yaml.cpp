#include "megacpp/config/fsdp2_config_yaml.h"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

namespace megacpp::config {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw std::invalid_argument(source + ": key '" + key + "': " + what);
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

std::vector<std::string> string_list(const YAML::Node& node, const std::string& source, const std::string& key) {
  if (node.IsNull()) return {};
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) fail(source, key, "expected a list of module patterns");
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(scalar<std::string>(item, source, key, "a module pattern"));
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
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (key == "sharding_size") {
      c.sharding_size = v.IsNull() ? -1 : scalar<int>(v, source, key, "an integer");
    } else if (key == "sub_modules_to_wrap") {
      c.sub_modules_to_wrap = string_list(v, source, key);
    } else if (key == "ignored_modules") {
      c.ignored_modules = string_list(v, source, key);
    } else if (key == "recompute_modules") {
      c.recompute_modules = string_list(v, source, key);
    } else if (key == "reshard_after_forward") {
      c.reshard_after_forward = scalar<bool>(v, source, key, "true or false");
    } else if (key == "param_dtype") {
      c.param_dtype = optional_dtype(v, source, key);
    } else if (key == "reduce_dtype") {
      c.reduce_dtype = optional_dtype(v, source, key);
    } else if (key == "output_dtype") {
      c.output_dtype = optional_dtype(v, source, key);
    } else if (key == "cast_forward_inputs") {
      c.cast_forward_inputs = scalar<bool>(v, source, key, "true or false");
    } else if (key == "num_to_forward_prefetch") {
      c.num_to_forward_prefetch = non_negative(v, source, key);
    } else if (key == "num_to_backward_prefetch") {
      c.num_to_backward_prefetch = non_negative(v, source, key);
    } else {
      fail(source, key, "unknown key (known: sharding_size, sub_modules_to_wrap, ignored_modules, recompute_modules, "
                        "reshard_after_forward, param_dtype, reduce_dtype, output_dtype, cast_forward_inputs, "
                        "num_to_forward_prefetch, num_to_backward_prefetch)");
    }
  }
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
