// megacpp-train's command line: the flags it takes, and argv parsed into them with every unknown
// or refused flag reported at once (Note [Megatron flags]) and the model family chosen (Note
// [Megatron architecture]).
#pragma once

#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "settings/megatron_architecture.h"

namespace megacpp::settings {

struct CommandLine {
  cxxopts::ParseResult result;
  ModelFamilyChoice family;
  std::vector<std::string> libraries;  // --model-library, loaded
  // Every flag that is unknown, refused with its reason, or describes no model family; the
  // caller adds the values its sections refuse and refuses them all at once (refuse_flags).
  std::vector<std::string> problems;
  bool help = false;                   // --help: printed, nothing else checked
  std::vector<std::string> notes;      // for the log: how the command line was read
};

// Throws std::invalid_argument only for what cxxopts cannot parse at all (a flag missing its value).
CommandLine parse_command_line(int argc, const char* const* argv);

// One error for everything wrong on a command line, each problem on its own line.
[[noreturn]] void refuse_flags(const std::vector<std::string>& problems);

}  // namespace megacpp::settings
