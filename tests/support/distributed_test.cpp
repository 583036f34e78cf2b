#include "tests/support/distributed_test.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace megacpp::testing {
namespace {

constexpr const char* kWorkerRank = "MEGACPP_TEST_WORKER_RANK";
constexpr const char* kWorkerCall = "MEGACPP_TEST_WORKER_CALL";

std::string current_test_filter() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

int call_counter = 0;  // run_on_ranks calls made by the current test process

void run_as_worker(const std::function<void(parallel::DistributedRuntime&)>& body) {
  parallel::RuntimeOptions options;
  options.timeout = std::chrono::seconds(60);
  options.rank0_hosts_store = false;
  options.force_cpu = true;
  auto runtime = parallel::DistributedRuntime::initialize(parallel::read_launch_environment(), options);
  body(*runtime);
  runtime->barrier();
}

pid_t spawn_rank(int rank, int world, int port, int call) {
  const std::string filter = "--gtest_filter=" + current_test_filter();
  pid_t pid = fork();
  if (pid == 0) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv(kWorkerRank, std::to_string(rank).c_str(), 1);
    setenv(kWorkerCall, std::to_string(call).c_str(), 1);
    execl("/proc/self/exe", "megacpp-tests", filter.c_str(), "--gtest_brief=1", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

}  // namespace

void run_on_ranks(int world_size, const std::function<void(parallel::DistributedRuntime&)>& body) {
  const int call = call_counter++;
  if (const char* worker_call = std::getenv(kWorkerCall)) {
    if (std::atoi(worker_call) == call) run_as_worker(body);
    return;
  }
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;
  store_options.isServer = true;
  store_options.waitWorkers = false;
  store_options.timeout = std::chrono::seconds(60);
  c10d::TCPStore store("127.0.0.1", store_options);
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) pids.push_back(spawn_rank(r, world_size, store.getPort(), call));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  std::vector<int> status(world_size, -1);
  int remaining = world_size;
  bool timed_out = false;
  while (remaining > 0) {
    for (int r = 0; r < world_size; ++r) {
      if (status[r] != -1) continue;
      int s = 0;
      if (waitpid(pids[r], &s, WNOHANG) == pids[r]) {
        status[r] = s;
        --remaining;
        if (!(WIFEXITED(s) && WEXITSTATUS(s) == 0)) {  // one failed rank: stop the others
          for (int o = 0; o < world_size; ++o) {
            if (status[o] == -1) kill(pids[o], SIGTERM);
          }
        }
      }
    }
    if (!timed_out && std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      for (int r = 0; r < world_size; ++r) {
        if (status[r] == -1) kill(pids[r], SIGKILL);
      }
      ADD_FAILURE() << "ranks did not finish within 180 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int r = 0; r < world_size; ++r) {
    EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
        << "rank " << r << " of " << world_size << " failed (wait status " << status[r] << ")";
  }
}

std::string scratch_dir() {
  char pattern[] = "/tmp/megacpp-test-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  return dir;
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
