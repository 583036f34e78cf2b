// Multi-process tests: run_on_ranks re-executes this test binary once per rank (filtered to
// the current test), with the rank's environment and a TCPStore hosted by the parent on a free
// port, so parallel tests never collide. Inside a rank the body runs against a real Gloo
// runtime; assertion failures make that rank exit non-zero, which fails the parent's test.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "parallel/distributed_runtime.h"

namespace megacpp::testing {

void run_on_ranks(int world_size, const std::function<void(parallel::DistributedRuntime&)>& body);

// A unique, empty scratch directory for this test (removed by the OS's /tmp cleaning).
std::string scratch_dir();

// Runs a shell command, returning its exit status and combined stdout+stderr.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult run_command(const std::string& command);

}  // namespace megacpp::testing
