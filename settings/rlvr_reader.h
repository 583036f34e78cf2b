// The reader of ROLL's RLVR YAML (settings/rlvr_config.h), shared by its two halves: the roles
// (actor_train, actor_infer, reference; settings/rlvr_config.cpp) and the algorithm's keys
// (settings/rlvr_algorithm.cpp). Internal to them.
#pragma once

#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "settings/rlvr_flags.h"

namespace megacpp::settings::rlvr {

struct Reader {
  std::string path;
  YAML::Node root;
  RlvrConfig config;

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& what) const {
    const std::string line = node.IsDefined() && !node.Mark().is_null() ? ":" + std::to_string(node.Mark().line + 1) : "";
    throw std::invalid_argument(path + line + ": key '" + key + "': " + what);
  }

  // The scalar text of `node`, a ${name} taken from the top level.
  std::string text(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, key, "expected a value");
    const std::string value = node.Scalar();
    static const std::regex reference(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)\})");
    std::smatch m;
    if (!std::regex_match(value, m, reference)) return value;
    const YAML::Node target = root[m[1].str()];
    if (!target.IsDefined() || !target.IsScalar()) fail(node, key, value + " names no top-level value");
    return target.Scalar();
  }

  // --name VALUE; a second key meaning the same flag must say the same.
  void flag(const YAML::Node& node, const std::string& key, const std::string& name, const std::string& value) {
    for (const auto& [given, earlier] : config.flags) {
      if (given != name) continue;
      if (earlier != value) fail(node, key, "gives --" + name + " " + value + ", another key gave it " + earlier);
      return;
    }
    config.flags.emplace_back(name, value);
  }
  // ROLL's value for a key the file leaves out, where megacpp-grpo's default differs.
  void default_flag(const std::string& name, const std::string& value) { config.defaults.emplace_back(name, value); }
  void flag(const YAML::Node& node, const std::string& key, const std::string& name) { flag(node, key, name, text(node, key)); }

  std::vector<int> ranks(const YAML::Node& node, const std::string& key) const {
    std::vector<int> ranks;
    if (node.IsSequence()) {
      for (const auto& item : node) ranks.push_back(std::stoi(text(item, key)));
      return ranks;
    }
    const std::string value = text(node, key);
    std::smatch m;
    if (std::regex_match(value, m, std::regex(R"(\s*list\(range\(\s*(\d+)\s*,\s*(\d+)\s*\)\)\s*)"))) {
      for (int r = std::stoi(m[1]); r < std::stoi(m[2]); ++r) ranks.push_back(r);
      return ranks;
    }
    if (!std::regex_match(value, std::regex(R"(\s*\[[\d\s,]*\]\s*)"))) fail(node, key, "expected a list of ranks, \"[0, 1]\" or list(range(A,B))");
    std::stringstream numbers(value.substr(value.find('[') + 1));
    for (std::string n; std::getline(numbers, n, ',');) {
      if (n.find_first_of("0123456789") != std::string::npos) ranks.push_back(std::stoi(n));
    }
    return ranks;
  }

  // `value` must be `expected` (as text): settings megacpp-grpo has one way of doing.
  void require(const YAML::Node& node, const std::string& key, const std::string& expected, const std::string& why) const {
    if (text(node, key) != expected) fail(node, key, "must be " + expected + " (" + why + ")");
  }

  void unknown(const YAML::Node& key_node, const std::string& key, const std::string& known) const {
    fail(key_node, key, "not read by megacpp-grpo (it reads " + known + ")");
  }

  void top_level();
  // ROLL's PPO / RLVR algorithm keys at the top level (settings/rlvr_algorithm.cpp): false when `key`
  // is not one; finish_algorithm() adds what their absence means in ROLL.
  bool algorithm_key(const YAML::Node& key_node, const std::string& key, const YAML::Node& value);
  void finish_algorithm();
  bool run_key(const std::string& key, const YAML::Node& value);  // settings/rlvr_config.cpp
  bool boolean(const YAML::Node& node, const std::string& key) const;
  void training_args(const YAML::Node& node, const std::string& key);
  void megatron_strategy(const YAML::Node& config, const std::string& key);
  void megatron_reference(const YAML::Node& strategy_args, const std::string& key, const YAML::Node& trained) const;
  std::string decay_style(const YAML::Node& node, const std::string& key) const;
  void actor_train(const YAML::Node& node, std::vector<int>& mapping);
  void actor_infer(const YAML::Node& node, const std::vector<int>& trainers);
  void reference(const YAML::Node& node, const std::vector<int>& trainers);
  std::string strategy_name(const YAML::Node& strategy_args, const std::string& key) const;
};

std::string emitted(const YAML::Node& node);

}  // namespace megacpp::settings::rlvr
