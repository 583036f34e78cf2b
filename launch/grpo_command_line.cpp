#include "launch/grpo_command_line.h"

#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/grpo_section.h"
#include "settings/arguments.h"
#include "settings/rlvr_config.h"

namespace megacpp::launch {
namespace {

bool is_own(const std::string& name) {
  for (const auto& f : grpo_flags()) {
    if (name == f.name) return true;
  }
  return false;
}

bool given(const std::vector<const char*>& rest, const std::string& name) {
  for (const char* arg : rest) {
    const std::string a = arg;
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

// --rl-config-path's keys as flags: own ones into `split.own`, megacpp-train's appended to the rest
// (their text kept in `storage`). A flag given on both sides is refused naming both.
void add_rlvr_config(SplitCommandLine& split, rl::GrpoOptions& options, std::deque<std::string>& storage) {
  const std::string path = split.own.at("rl-config-path");
  const settings::RlvrConfig config = settings::read_rlvr_config(path);
  auto add = [&](const std::string& name, const std::string& value) {
    if (is_own(name)) {
      split.own[name] = value.empty() ? "true" : value;  // "" for a switch
      return;
    }
    split.rest.push_back(storage.emplace_back("--" + name).c_str());
    if (!value.empty()) split.rest.push_back(storage.emplace_back(value).c_str());
  };
  auto on_command_line = [&](const std::string& name) { return is_own(name) ? split.own.count(name) > 0 : given(split.rest, name); };
  for (const auto& [name, value] : config.flags) {
    if (on_command_line(name)) throw std::invalid_argument("--" + name + " is given on the command line and by " + path + "; keep one");
    add(name, value);
  }
  for (const auto& [name, value] : config.defaults) {
    if (!on_command_line(name)) add(name, value);
  }
  if (!config.train_strategy_yaml.empty() && given(split.rest, "fsdp2-config-path")) {
    throw std::invalid_argument("--fsdp2-config-path and actor_train.strategy_args in " + path + " both give the FSDP2 config; keep one");
  }
  options.train_strategy_yaml = config.train_strategy_yaml;
  options.train_strategy_source = config.source;
  options.trainer_ranks = config.trainer_ranks;
  options.experiment = config.experiment;
}

}  // namespace

GrpoCommandLine read_grpo_command_line(SplitCommandLine split, const char* program) {
  rl::GrpoOptions from_config;
  std::deque<std::string> storage;  // the text of the YAML's megacpp-train flags, which split.rest points into
  if (split.own.count("rl-config-path")) add_rlvr_config(split, from_config, storage);
  refuse_unread_flags(split, grpo_unread_flags(), program);
  GrpoCommandLine line{read_grpo_flags(split.own), settings::parse_arguments(static_cast<int>(split.rest.size()), split.rest.data())};
  line.options.train_strategy_yaml = from_config.train_strategy_yaml;
  line.options.train_strategy_source = from_config.train_strategy_source;
  line.options.trainer_ranks = from_config.trainer_ranks;
  line.options.experiment = from_config.experiment;
  if (!given(split.rest, "lr-decay-style")) line.args.lr_decay_style = "constant";  // verl's default: no decay unless asked for
  if (!given(split.rest, "log-interval")) line.args.log_interval = 1;                 // ROLL's logging_steps: every step
  return line;
}

}  // namespace megacpp::launch
