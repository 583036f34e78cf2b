// megacpp-grpo's whole command line read once: its own flags (launch/grpo_section), the keys of
// ROLL's RLVR YAML given by --rl-config-path (settings/rlvr_config) merged with them, and the
// rest as megacpp-train's flags with GRPO's defaults.
#pragma once

#include "launch/own_flags.h"
#include "rl/grpo_run.h"
#include "settings/training_arguments.h"

namespace megacpp::launch {

struct GrpoCommandLine {
  rl::GrpoOptions options;
  settings::TrainingArguments args;
};

// Throws std::invalid_argument naming the flag (or the YAML key given on the command line as
// well) at fault, and for a megacpp-train flag a GRPO run does not read.
GrpoCommandLine read_grpo_command_line(SplitCommandLine split, const char* program);

}  // namespace megacpp::launch
