#include "launch/own_flags.h"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace megacpp::launch {
namespace {

// "name" of "--name" or "--name=value"; "" for what is not a flag.
std::string flag_name(const std::string& arg) {
  if (arg.rfind("--", 0) != 0) return "";
  const size_t equals = arg.find('=');
  return arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
}

}  // namespace

SplitCommandLine split_command_line(int argc, char** argv, const std::vector<OwnFlag>& flags) {
  SplitCommandLine split;
  split.rest.push_back(argv[0]);
  bool has_data = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") split.help = true;
    if (arg == "--mock-data" || arg.rfind("--data-path", 0) == 0 || arg.rfind("--mock-data=", 0) == 0) has_data = true;
    const size_t equals = arg.find('=');
    const std::string name = flag_name(arg);
    const OwnFlag* own = nullptr;
    for (const auto& f : flags) own = name == f.name ? &f : own;
    if (!own) {
      split.rest.push_back(argv[i]);
      continue;
    }
    std::string value = "true";
    if (own->takes_value) {
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw std::invalid_argument("--" + name + " needs a value");
      }
    }
    split.own[name] = value;
  }
  static const char* const kNoData = "--mock-data";
  if (!has_data) split.rest.push_back(kNoData);
  return split;
}

void refuse_unread_flags(const SplitCommandLine& split, const std::vector<UnreadFlag>& unread, const char* program) {
  for (size_t i = 1; i < split.rest.size(); ++i) {
    const std::string name = flag_name(split.rest[i]);
    for (const auto& flag : unread) {
      if (name == flag.name) throw std::invalid_argument("--" + name + ": not read by " + program + " (" + flag.why + ")");
    }
  }
}

void print_own_flags(const char* title, const std::vector<OwnFlag>& flags, const char* tail) {
  std::printf("%s\n\n", title);
  for (const auto& f : flags) std::printf("  --%-32s %s\n", (std::string(f.name) + (f.takes_value ? " V" : "")).c_str(), f.help);
  std::printf("\n%s\n", tail);
}

}  // namespace megacpp::launch
