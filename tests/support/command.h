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

// Debian's python3, whose packages hold python3-torch (1.13) and NumPy (scripts/setup.sh); a
// pyenv or venv python3 earlier on PATH would not see them.
inline const std::string kDebianPython = "/usr/bin/python3";
// "kDebianPython SOURCE/tests/reference/SCRIPT": how a command runs one of the reference scripts.
std::string reference_script(const std::string& script);

}  // namespace megacpp::testing
