// megacpp-run's command line: the options, their parsing and checks, the --help text, and the
// thread settings they give every rank.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace megacpp::launch {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: pick a free local port (single node only)
  int grace_seconds = 5;    // SIGTERM -> SIGKILL delay during teardown
  // OMP_NUM_THREADS of every rank; 0: the environment's, else 1 when several ranks share the
  // node (as torchrun does), so that ranks do not oversubscribe the cores.
  int omp_num_threads = 0;
  // Stop the job when a rank reports no progress for this long (Note [Hang detection] in
  // hang_watch.h); 0: off.
  int hang_timeout_seconds = 300;
  bool help = false;        // -h/--help seen; `command` may then be empty
  std::vector<std::string> command;  // PROGRAM followed by its arguments
};

// Parses the launcher's arguments (without argv[0]). Throws
// std::invalid_argument naming the offending flag on bad input.
LaunchOptions parse_launch_options(const std::vector<std::string>& args);
LaunchOptions parse_launch_options(int argc, const char* const* argv);

// Cross-field checks (also run by parse_launch_options unless help is set).
// Throws std::invalid_argument.
void validate_launch_options(const LaunchOptions& opts);

// The thread settings every rank gets on top of the launcher's environment: OMP_NUM_THREADS
// from --omp-num-threads, else 1 when several ranks share the node and the environment sets
// none; OMP_WAIT_POLICY=PASSIVE unless set (OpenMP threads spinning between parallel regions
// steal the cores of the other ranks and of OpenBLAS's own threads).
std::vector<std::pair<std::string, std::string>> thread_environment(const LaunchOptions& opts);

// The --help text.
std::string launch_usage();

}  // namespace megacpp::launch
