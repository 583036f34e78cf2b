// Multi-process tests: run_on_ranks re-executes this test binary once per rank (filtered to
// the current test), with the rank's environment and a TCPStore hosted by the parent on a free
// port, so parallel tests never collide. Inside a rank the body runs against a real Gloo
// runtime; assertion failures make that rank exit non-zero, which fails the parent's test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/compat.h"
#include "parallel/distributed_runtime.h"
#include "tests/support/command.h"

namespace megacpp::testing {

void run_on_ranks(int world_size, const std::function<void(parallel::DistributedRuntime&)>& body);
// The same for a test whose body kills the ranks in `killed` (SIGKILL, a rank dying mid-way):
// their death does not stop the others, which must still exit 0 (and within 180 s).
void run_on_ranks_with_killed(int world_size, const std::vector<int>& killed,
                              const std::function<void(parallel::DistributedRuntime&)>& body);

// A unique, empty scratch directory for this test (removed by the OS's /tmp cleaning).
std::string scratch_dir();


// A free TCP port on 127.0.0.1 for jobs whose processes must agree on MASTER_PORT before any of
// them starts; no other test process gets it while this one runs (tests/support/test_ports.cpp).
int free_port();

// A TCPStore server on a free port of 127.0.0.1, hosted by this process (getPort() tells it).
c10::intrusive_ptr<c10d::TCPStore> host_store();

// What the environment of a StreamingProcess differs in from this process's.
struct ProcessEnvironment {
  std::vector<std::pair<std::string, std::string>> set;  // added or overridden
  std::vector<std::string> unset;                         // removed
};

// A child process whose combined stdout+stderr is read by a background thread while it runs,
// so a test can wait for a line, signal the process, then collect everything. The child leads
// its own process group (its descendants inherit it), starts with default SIGINT/SIGTERM
// handling and an empty signal mask, and is SIGKILLed together with its group and reaped if
// it is still running when the object goes away.
class StreamingProcess {
 public:
  explicit StreamingProcess(const std::vector<std::string>& argv, const ProcessEnvironment& env = {});
  ~StreamingProcess();
  StreamingProcess(const StreamingProcess&) = delete;
  StreamingProcess& operator=(const StreamingProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits until `needle` has appeared in the output (true), or the output ends or `timeout`
  // passes (false).
  bool wait_for_output(const std::string& needle, std::chrono::milliseconds timeout);
  // The output so far.
  std::string output() const;
  void send(int sig) const;
  // Waits for the process to exit and its output to end; past `timeout` SIGKILLs its process
  // group first and returns false. The exit is then in exit_code()/term_signal().
  bool wait(std::chrono::milliseconds timeout);
  bool exited() const { return exited_; }
  int exit_code() const;    // -1 unless it exited normally
  int term_signal() const;  // 0 unless a signal killed it
  // When the exit was seen (polled every few milliseconds; valid once exited()).
  std::chrono::steady_clock::time_point exit_time() const { return end_; }

 private:
  void read_loop(int fd);

  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::chrono::steady_clock::time_point end_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string output_;
  bool eof_ = false;
  std::thread reader_;
};

// The pids of the live direct children of `parent` (scanned from /proc/<pid>/stat).
std::vector<pid_t> child_pids(pid_t parent);
// The value of `name` in the environment `pid` was started with ("" when absent or unreadable).
std::string initial_environment_value(pid_t pid, const std::string& name);
// The live processes in process group `pgid`, zombies excluded.
std::vector<pid_t> processes_in_group(pid_t pgid);

}  // namespace megacpp::testing
