#include "tests/support/command.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>

namespace megacpp::testing {

std::string reference_script(const std::string& script) {
  return kDebianPython + " " MEGACPP_SOURCE_DIR "/tests/reference/" + script;
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace megacpp::testing
