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
  bool help = false;                   // --help: printed, nothing else checked
};

// Throws std::invalid_argument listing every flag that is unknown, refused with its reason, or
// describes no model family.
CommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace megacpp::settings
