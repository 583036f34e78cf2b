// megacpp-grpo's own flags as one section: each declared with its help, read into
// rl::GrpoOptions and defaulted there once (the help's "default N" is printed from
// rl::GrpoOptions{}), the objective's flags (rl::ObjectiveOptions) among them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launch/own_flags.h"
#include "rl/grpo_run.h"

namespace megacpp::launch {

// The flags in --help's order. --rl-config-path is among them; main reads it (it names a file
// of flags, not an option).
const std::vector<OwnFlag>& grpo_flags();

// The options the given own flags say (by name, as split_command_line gives them), the rest
// at their defaults. Throws std::invalid_argument naming a flag whose value is not a number
// where one is needed.
rl::GrpoOptions read_grpo_flags(const std::map<std::string, std::string>& given);

// megacpp-train's flags that mean nothing to a GRPO run: refused when given, naming what it
// reads instead (refuse_unread_flags).
const std::vector<UnreadFlag>& grpo_unread_flags();

}  // namespace megacpp::launch
