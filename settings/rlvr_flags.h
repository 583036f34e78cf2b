// What ROLL's RLVR YAML means to megacpp-grpo (settings/rlvr_config.h reads it): flags, the FSDP2
// config of actor_train, and how many ranks the trainer takes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace megacpp::settings {

struct RlvrConfig {
  // (flag without dashes, value) in file order; a switch has the value "" (empty).
  std::vector<std::pair<std::string, std::string>> flags;
  // ROLL's defaults for keys the file leaves out where megacpp-grpo's differ (no KL loss, no dual
  // clip, seq-mean-token-mean, ...): taken unless the command line gives the flag.
  std::vector<std::pair<std::string, std::string>> defaults;
  std::string train_strategy_yaml;  // actor_train's {model_args, strategy_args}: an fsdp2 config ("" when absent)
  std::string source;               // "FILE (actor_train)", for the FSDP2 reader's errors
  int trainer_ranks = 0;            // how many ranks actor_train.device_mapping names (0: not given)
  std::string experiment;           // exp_name ("" when absent)
};

}  // namespace megacpp::settings
