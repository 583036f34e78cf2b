// The flags of a program that also reads megacpp-train's (megacpp-infer, megacpp-grpo): its own
// are taken out of the command line, and the rest goes to settings::parse_arguments, so that a
// training script's flags give the same model, tokenizer, layout and weights.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace megacpp::launch {

struct OwnFlag {
  const char* name;  // without the dashes
  bool takes_value;  // else a switch ("true" when given)
  const char* help;
};

struct SplitCommandLine {
  std::map<std::string, std::string> own;  // by name, the values of the own flags given
  std::vector<const char*> rest;           // argv[0] and everything else, in order
  bool help = false;                       // --help or -h
};

// Reads `--name V`, `--name=V` and switches. `--mock-data` is added to the rest when it has no
// data flag (the data section needs a source; such a program reads none). Throws
// std::invalid_argument for an own flag without its value.
SplitCommandLine split_command_line(int argc, char** argv, const std::vector<OwnFlag>& flags);

// A megacpp-train flag that a program takes no meaning from, and why (what it reads instead).
struct UnreadFlag {
  const char* name;  // without the dashes
  const char* why;
};

// Throws std::invalid_argument "--NAME: not read by PROGRAM (WHY)" for the first of `unread`
// given in `split.rest`, so that a training script's flag that would do nothing here is never
// taken silently.
void refuse_unread_flags(const SplitCommandLine& split, const std::vector<UnreadFlag>& unread, const char* program);

// "  --name V     help" lines, then `tail`.
void print_own_flags(const char* title, const std::vector<OwnFlag>& flags, const char* tail);

}  // namespace megacpp::launch
