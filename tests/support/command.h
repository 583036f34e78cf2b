// Running a shell command from a test (torch-free, shared by every test binary).
#pragma once

#include <string>

namespace megacpp::testing {

struct CommandResult {
  int status = -1;     // exit status; -1 when a signal ended it
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh and waits for it.
CommandResult run_command(const std::string& command);

}  // namespace megacpp::testing
