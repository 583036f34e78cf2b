#include "launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hang_watch.h"
#include "port_claim.h"
#include "rank_process.h"

extern char** environ;

namespace megacpp::launch {
namespace {

using Clock = std::chrono::steady_clock;

// After the last rank is reaped its output is already in the pipe; only an
// orphaned grandchild can keep a pipe open, and we do not wait for it long.
constexpr auto kDrainTimeout = std::chrono::seconds(1);

// `heartbeat_file`: the rank's MEGACPP_HEARTBEAT_FILE, "" when hang detection is off.
std::vector<std::string> rank_environment(const LaunchOptions& o, int local_rank, int port, const std::string& heartbeat_file) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"NODE_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"MEGACPP_HEARTBEAT_FILE", heartbeat_file}};
  for (auto& var : thread_environment(o)) vars.push_back(std::move(var));
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(std::begin(vars), std::end(vars),
                                        [&](const auto& v) { return v.first == name; });
    if (!overridden) env.push_back(entry);
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts the ranks and watches them until all have ended: relays their output, reaps them,
// forwards the launcher's signals, and tears the job down on the first failure or hang.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& opts, int port, int signal_fd)
      : opts_(opts), port_(port), signal_fd_(signal_fd),
        hang_watch_(opts.hang_timeout_seconds) {}

  int run() {
    spawn_all();
    std::optional<Clock::time_point> drain_until;
    while (any_running() || any_open()) {
      if (!any_running()) {
        if (!drain_until) drain_until = Clock::now() + kDrainTimeout;
        if (Clock::now() >= *drain_until) break;
      }
      poll_once();
      reap();
      check_progress();
      if (stopping_ && !killed_ && Clock::now() >= kill_at_) escalate();
    }
    for (Rank& r : ranks_)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) close_stream(*s);
    return finish();
  }

 private:
  void spawn_all() {
    ranks_.resize(static_cast<size_t>(opts_.nproc_per_node));
    std::vector<std::string> args = opts_.command;
    std::vector<char*> argv = c_array(args);
    for (int l = 0; l < opts_.nproc_per_node; ++l) {
      Rank& r = ranks_[static_cast<size_t>(l)];
      r.rank = opts_.node_rank * opts_.nproc_per_node + l;
      init_stream(r.out, r.rank, STDOUT_FILENO);
      init_stream(r.err, r.rank, STDERR_FILENO);
      std::vector<std::string> env = rank_environment(opts_, l, port_, hang_watch_.file_for(r.rank));
      std::vector<char*> envp = c_array(env);
      try {
        spawn_rank(r, argv.data(), envp.data());
      } catch (const std::exception& e) {
        say("failed to start rank " + std::to_string(r.rank) + ": " + e.what());
        failed_rank_ = r.rank;
        start_teardown(SIGTERM);
        return;
      }
      hang_watch_.watch(r.rank, r.pid);
    }
  }

  static void init_stream(Stream& s, int rank, int dest) {
    s.dest = dest;
    s.prefix = "[rank" + std::to_string(rank) + "]: ";
  }

  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }

  bool any_open() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const Rank& r) { return r.out.fd >= 0 || r.err.fd >= 0; });
  }

  void poll_once() {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Rank& r : ranks_)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
    if (::poll(fds.data(), fds.size(), kPollMs) <= 0) return;  // EINTR: signal is in the pipe
    if (fds[0].revents != 0) drain_signals();
    for (size_t i = 0; i < streams.size(); ++i)
      if (fds[i + 1].revents != 0) pump(*streams[i], 1);
  }

  void drain_signals() {
    unsigned char buf[16];
    ssize_t n;
    while ((n = ::read(signal_fd_, buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < n; ++i) on_signal(buf[i]);
  }

  void on_signal(int sig) {
    if (sig == SIGCHLD) return;  // only a wake-up: reap() runs next
    say("received " + signal_name(sig) +
        (stopping_ ? ", killing all ranks" : ", forwarding it to all ranks"));
    if (!stopping_) got_signal_ = sig;
    start_teardown(sig);
  }

  void reap() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      const pid_t p = ::waitpid(r.pid, &status, WNOHANG);
      if (p == r.pid) {
        on_exit(r, status);
      } else if (p < 0 && errno == ECHILD) {
        on_exit(r, 255 << 8);  // reaped behind our back: status unknown, assume failure
      }
    }
  }

  // Note [Hang detection] (hang_watch.h), once a second.
  void check_progress() {
    if (opts_.hang_timeout_seconds == 0 || stopping_ || Clock::now() < next_progress_check_) return;
    next_progress_check_ = Clock::now() + std::chrono::seconds(1);
    if (auto report = hang_watch_.check()) {
      say(*report + "; stopping the job");
      hung_ = true;
      start_teardown(SIGTERM);
    }
  }

  void on_exit(Rank& r, int status) {
    r.running = false;
    // Print what the rank wrote before it died ahead of the failure message.
    pump(r.out, 64);
    pump(r.err, 64);
    // A terminal's Ctrl-C (or any signal to the whole process group) reaches the launcher
    // and the ranks together. The launcher's handler has run by now (the signal was pending
    // before the rank could die), but poll_once() may not have read its byte yet: do it
    // first, so a rank dying of that signal counts as the interrupt, not as a failure.
    if (!stopping_) drain_signals();
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !stopping_;
    // The first failure may be a collective's timeout on a rank that only waited: the ranks it
    // waited for (Note [Hang detection]).
    const std::optional<std::string> waited_for = failed ? hang_watch_.behind(r.rank) : std::nullopt;
    hang_watch_.forget(r.rank);
    if (!failed) return;
    say(describe_exit(r, status));
    if (waited_for) {
      say("rank " + std::to_string(r.rank) +
          " failed while these ranks were behind it (a collective that timed out there waited for them): " + *waited_for);
    }
    failed_rank_ = r.rank;
    start_teardown(SIGTERM);
  }

  // First request: send `sig` and arm the SIGKILL deadline. A second request
  // (e.g. another Ctrl-C) does not wait for the grace period again.
  void start_teardown(int sig) {
    if (stopping_) {
      escalate();
      return;
    }
    stopping_ = true;
    kill_at_ = Clock::now() + std::chrono::seconds(opts_.grace_seconds);
    signal_running(sig);
  }

  void escalate() {
    killed_ = true;
    signal_running(SIGKILL);
  }

  // Unreaped ranks keep their pid reserved, so this never hits a stranger.
  void signal_running(int sig) {
    for (const Rank& r : ranks_)
      if (r.running) ::kill(r.pid, sig);
  }

  int finish() const {
    if (got_signal_ != 0) return 128 + got_signal_;
    if (hung_) {
      say("stopping: a rank made no progress (see above)");
      return 1;
    }
    if (failed_rank_ >= 0) {
      say("stopping: rank " + std::to_string(failed_rank_) + " failed first");
      return 1;
    }
    return 0;
  }

  const LaunchOptions& opts_;
  const int port_;
  const int signal_fd_;
  std::vector<Rank> ranks_;
  HangWatch hang_watch_;  // stops the job only with --hang-timeout-seconds > 0
  Clock::time_point next_progress_check_{};
  bool hung_ = false;
  int failed_rank_ = -1;
  int got_signal_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_{};
};

}  // namespace

int run_launcher(const LaunchOptions& opts) {
  validate_launch_options(opts);
  ensure_std_fds_open();
  // Note [One job per port]: the claim is held until every rank has ended.
  std::optional<PortClaim> claim;
  const bool several_ranks = opts.nnodes * opts.nproc_per_node > 1;
  int port = opts.master_port;
  if (port == 0) {
    port = several_ranks ? claim_free_port(opts.master_addr, &claim) : pick_free_port();
  } else if (several_ranks) {
    claim.emplace(opts.master_addr, port, opts.nnodes, opts.node_rank);
  }
  if (opts.omp_num_threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr && opts.nproc_per_node > 1) {
    say("OMP_NUM_THREADS is 1 for each of the " + std::to_string(opts.nproc_per_node) +
        " ranks (not set; --omp-num-threads N or OMP_NUM_THREADS=N to change it)");
  }
  SignalGuard guard;
  return Supervisor(opts, port, guard.read_fd()).run();
}

}  // namespace megacpp::launch
