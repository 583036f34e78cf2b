#include "tests/support/distributed_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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

// The index of a run_on_ranks call within the current test, which a rank (running that test
// alone) counts the same way; the count restarts with each test, so that a binary running several
// tests hands each rank the call of its own test.
int next_call_of_this_test() {
  static std::string test;
  static int calls = 0;
  if (current_test_filter() != test) {
    test = current_test_filter();
    calls = 0;
  }
  return calls++;
}

// `barrier`: all ranks wait for each other at the end (not when some are killed on the way).
void run_as_worker(const std::function<void(parallel::DistributedRuntime&)>& body, bool barrier) {
  // As the programs' mains: a write to a socket a failed peer closed is an error to report, not a
  // SIGPIPE that kills the rank (a test whose rank fails on purpose lost another rank to it).
  ::signal(SIGPIPE, SIG_IGN);
  parallel::RuntimeOptions options;
  options.timeout = std::chrono::seconds(60);
  options.rank0_hosts_store = false;
  options.force_cpu = true;
  auto runtime = parallel::DistributedRuntime::initialize(parallel::read_launch_environment(), options);
  body(*runtime);
  if (barrier) runtime->barrier();
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
  run_on_ranks_with_killed(world_size, {}, body);
}

void run_on_ranks_with_killed(int world_size, const std::vector<int>& killed,
                              const std::function<void(parallel::DistributedRuntime&)>& body) {
  const int call = next_call_of_this_test();
  const auto is_killed = [&](int r) { return std::find(killed.begin(), killed.end(), r) != killed.end(); };
  if (const char* worker_call = std::getenv(kWorkerCall)) {
    if (std::atoi(worker_call) == call) run_as_worker(body, killed.empty());
    return;
  }
  auto store = host_store();
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) pids.push_back(spawn_rank(r, world_size, store->getPort(), call));

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
        const bool expected = is_killed(r) ? WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL : WIFEXITED(s) && WEXITSTATUS(s) == 0;
        if (!expected) {  // one failed rank: stop the others
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
    if (is_killed(r)) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL)
          << "rank " << r << " of " << world_size << " was to be killed (wait status " << status[r] << ")";
    } else {
      EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
          << "rank " << r << " of " << world_size << " failed (wait status " << status[r] << ")";
    }
  }
}

std::string scratch_dir() {
  char pattern[] = "/tmp/megacpp-test-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  return dir;
}

c10::intrusive_ptr<c10d::TCPStore> host_store() {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  return parallel::compat::make_tcp_store("127.0.0.1", options);
}

// ------------------------------------------------------------ StreamingProcess --

namespace {

std::vector<std::string> child_environment(const ProcessEnvironment& env) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const auto& u : env.unset) drop |= u == name;
    for (const auto& s : env.set) drop |= s.first == name;
    if (!drop) out.push_back(entry);
  }
  for (const auto& [name, value] : env.set) out.push_back(name + "=" + value);
  return out;
}

// argv[0] looked up in PATH (before fork: execvpe is not async-signal-safe).
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

StreamingProcess::StreamingProcess(const std::vector<std::string>& argv, const ProcessEnvironment& env) {
  if (argv.empty()) throw std::invalid_argument("StreamingProcess: empty argv");
  std::vector<std::string> args = argv, vars = child_environment(env);
  const std::string program = resolve_program(args[0]);
  std::vector<char*> c_args = c_strings(args), c_vars = c_strings(vars);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  pid_ = fork();
  if (pid_ == 0) {  // only async-signal-safe calls from here on
    setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(program.c_str(), c_args.data(), c_vars.data());
    static const char msg[] = "StreamingProcess: exec failed\n";
    [[maybe_unused]] ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(127);
  }
  const int fork_errno = errno;
  close(fds[1]);
  if (pid_ < 0) {
    close(fds[0]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  setpgid(pid_, pid_);  // also from here, so the group exists before anyone signals it
  reader_ = std::thread([this, fd = fds[0]] { read_loop(fd); });
}

StreamingProcess::~StreamingProcess() {
  if (!exited_) {
    killpg(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    exited_ = true;
  }
  killpg(pid_, SIGKILL);  // stragglers keeping the pipe open would block the reader forever
  if (reader_.joinable()) reader_.join();
}

void StreamingProcess::read_loop(int fd) {
  std::array<char, 65536> buffer{};
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    if (n <= 0) {
      eof_ = true;
      changed_.notify_all();
      break;
    }
    output_.append(buffer.data(), static_cast<size_t>(n));
    changed_.notify_all();
  }
  close(fd);
}

bool StreamingProcess::wait_for_output(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return output_.find(needle) != std::string::npos || eof_; }) &&
         output_.find(needle) != std::string::npos;
}

std::string StreamingProcess::output() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return output_;
}

void StreamingProcess::send(int sig) const {
  if (!exited_) kill(pid_, sig);
}

bool StreamingProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!exited_ && waitpid(pid_, &status_, WNOHANG) == pid_) {
      exited_ = true;
      end_ = std::chrono::steady_clock::now();
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (exited_ && eof_) return true;
      if (std::chrono::steady_clock::now() >= deadline) break;
      changed_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  killpg(pid_, SIGKILL);
  if (!exited_) {
    waitpid(pid_, &status_, 0);
    exited_ = true;
    end_ = std::chrono::steady_clock::now();
  }
  return false;
}

int StreamingProcess::exit_code() const { return exited_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }

int StreamingProcess::term_signal() const { return exited_ && WIFSIGNALED(status_) ? WTERMSIG(status_) : 0; }

// ------------------------------------------------------------------- /proc --

namespace {

// Fields 3 (state), 4 (ppid) and 5 (pgrp) of /proc/<pid>/stat; false if it is gone.
bool read_stat(pid_t pid, char& state, pid_t& ppid, pid_t& pgrp) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the command name may contain spaces and parentheses
  if (paren == std::string::npos) return false;
  long long parent = 0, group = 0;
  if (std::sscanf(text.c_str() + paren + 1, " %c %lld %lld", &state, &parent, &group) != 3) return false;
  ppid = static_cast<pid_t>(parent);
  pgrp = static_cast<pid_t>(group);
  return true;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (!dir) return pids;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return pids;
}

// The live (not zombie or dead) processes whose parent or process group is `wanted`.
std::vector<pid_t> live_pids_with(pid_t wanted, bool by_group) {
  std::vector<pid_t> out;
  for (pid_t pid : all_pids()) {
    char state = 0;
    pid_t ppid = 0, pgrp = 0;
    if (read_stat(pid, state, ppid, pgrp) && (by_group ? pgrp : ppid) == wanted && state != 'Z' && state != 'X') {
      out.push_back(pid);
    }
  }
  return out;
}

}  // namespace

std::vector<pid_t> child_pids(pid_t parent) { return live_pids_with(parent, /*by_group=*/false); }

std::string initial_environment_value(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = name + "=";
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.compare(0, prefix.size(), prefix) == 0) return entry.substr(prefix.size());
  }
  return "";
}

std::vector<pid_t> processes_in_group(pid_t pgid) { return live_pids_with(pgid, /*by_group=*/true); }

}  // namespace megacpp::testing
