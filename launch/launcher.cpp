#include "launcher.h"

#include "hang_watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <charconv>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace megacpp::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 100;
// After the last rank is reaped its output is already in the pipe; only an
// orphaned grandchild can keep a pipe open, and we do not wait for it long.
constexpr auto kDrainTimeout = std::chrono::seconds(1);
// A "line" this long without a newline is emitted anyway to bound memory.
constexpr size_t kMaxLine = size_t{1} << 20;

// ---------------------------------------------------------------- parsing --

struct IntFlag {
  const char* name;
  int LaunchOptions::*field;
  long long lo, hi;
};

const IntFlag kIntFlags[] = {
    {"--nproc-per-node", &LaunchOptions::nproc_per_node, 1, 1024},
    {"--nnodes", &LaunchOptions::nnodes, 1, 1000000},
    {"--node-rank", &LaunchOptions::node_rank, 0, 999999},
    {"--master-port", &LaunchOptions::master_port, 0, 65535},
    {"--grace-seconds", &LaunchOptions::grace_seconds, 0, 86400},
    {"--omp-num-threads", &LaunchOptions::omp_num_threads, 0, 1024},
    {"--hang-timeout-seconds", &LaunchOptions::hang_timeout_seconds, 0, 7 * 86400},
};

const IntFlag* find_int_flag(const std::string& name) {
  for (const IntFlag& f : kIntFlags)
    if (name == f.name) return &f;
  return nullptr;
}

std::string range_text(long long lo, long long hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

int parse_int(const std::string& flag, const std::string& text, const IntFlag& f) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < f.lo || v > f.hi)
    throw std::invalid_argument(flag + ": expected " + range_text(f.lo, f.hi) +
                                ", got '" + text + "'");
  return static_cast<int>(v);
}

// One option token: `typed` is the spelling given (kept for error messages),
// `name` the canonical dash spelling, `value` the part after '=' if any.
struct OptionToken {
  std::string typed, name;
  std::optional<std::string> value;
};

OptionToken split_option(const std::string& arg) {
  OptionToken t;
  const size_t eq = arg.find('=');
  t.typed = arg.substr(0, eq);
  if (eq != std::string::npos) t.value = arg.substr(eq + 1);
  t.name = t.typed;
  if (t.name.rfind("--", 0) == 0) std::replace(t.name.begin() + 2, t.name.end(), '_', '-');
  return t;
}

std::string take_value(const OptionToken& t, const std::vector<std::string>& args, size_t& i) {
  if (t.value) return *t.value;
  if (i >= args.size()) throw std::invalid_argument(t.typed + ": missing value");
  return args[i++];
}

// Applies one option; returns false for --help (which ends parsing).
bool apply_option(LaunchOptions& opts, const OptionToken& t,
                  const std::vector<std::string>& args, size_t& i) {
  if (t.name == "-h" || t.name == "--help") {
    if (t.value) throw std::invalid_argument(t.typed + ": does not take a value");
    opts.help = true;
    return false;
  }
  if (t.name == "--master-addr") {
    opts.master_addr = take_value(t, args, i);
    if (opts.master_addr.empty()) throw std::invalid_argument(t.typed + ": must not be empty");
    return true;
  }
  const IntFlag* f = find_int_flag(t.name);
  if (f == nullptr) throw std::invalid_argument("unknown option '" + t.typed + "'");
  opts.*(f->field) = parse_int(t.typed, take_value(t, args, i), *f);
  return true;
}

// ----------------------------------------------------------------- output --

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {  // inherited non-blocking stdout: wait for room
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, kPollMs);
      continue;
    }
    if (w < 0) return;  // nowhere left to report it
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void say(const std::string& msg) { write_all(STDERR_FILENO, "megacpp-run: " + msg + "\n"); }

std::string signal_name(int sig) {
  static const std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (const auto& [n, name] : kNames)
    if (n == sig) return name;
  return "SIG" + std::to_string(sig);
}

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

// ---------------------------------------------------------------- signals --

// Self-pipe: the handler only write()s the signal number (async-signal-safe);
// the poll loop does the real work.
int g_signal_pipe[2] = {-1, -1};
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGCHLD};
constexpr size_t kNumHandled = std::size(kHandledSignals);
struct sigaction g_saved_actions[kNumHandled];

void restore_saved_actions() {
  for (size_t i = 0; i < kNumHandled; ++i)
    ::sigaction(kHandledSignals[i], &g_saved_actions[i], nullptr);
}

extern "C" void on_launcher_signal(int sig) {
  const int saved_errno = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t r = ::write(g_signal_pipe[1], &b, 1);
  errno = saved_errno;
}

// Installs the handlers for the launcher's lifetime. SIGCHLD is caught too:
// it wakes poll() as soon as a rank exits, and an inherited SIG_IGN would
// otherwise auto-reap the ranks and hide their exit status.
class SignalGuard {
 public:
  SignalGuard() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw sys_error("pipe");
    for (size_t i = 0; i < kNumHandled; ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_launcher_signal;
      sa.sa_flags = SA_NOCLDSTOP;
      sigemptyset(&sa.sa_mask);
      ::sigaction(kHandledSignals[i], &sa, &g_saved_actions[i]);
    }
  }
  ~SignalGuard() {
    restore_saved_actions();
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int read_fd() const { return g_signal_pipe[0]; }
};

// A closed stdin/stdout/stderr would let pipe2() hand out fds 0-2 and confuse
// the dup2() calls in the child.
void ensure_std_fds_open() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", O_RDWR);
}

// ------------------------------------------------------------------ ranks --

struct Stream {
  int fd = -1;           // read end of the rank's pipe, -1 once closed
  int dest = -1;         // launcher fd the prefixed lines go to
  std::string prefix;    // "[rank<R>]: "
  std::string pending;   // bytes after the last newline
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

// Writes all completed lines in one write() so ranks never interleave mid-line.
void feed(Stream& s, const char* data, size_t n) {
  s.pending.append(data, n);
  std::string lines;
  size_t start = 0, nl;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    lines += s.prefix;
    lines.append(s.pending, start, nl + 1 - start);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (s.pending.size() >= kMaxLine) {
    lines += s.prefix + s.pending + "\n";
    s.pending.clear();
  }
  if (!lines.empty()) write_all(s.dest, lines);
}

void close_stream(Stream& s) {
  if (!s.pending.empty()) write_all(s.dest, s.prefix + s.pending + "\n");
  s.pending.clear();
  ::close(s.fd);
  s.fd = -1;
}

// Reads what is available (at most max_reads chunks, so one chatty rank
// cannot starve the others); closes the stream at EOF.
void pump(Stream& s, int max_reads) {
  char buf[65536];
  for (int i = 0; i < max_reads && s.fd >= 0; ++i) {
    const ssize_t n = ::read(s.fd, buf, sizeof buf);
    if (n > 0) {
      feed(s, buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      close_stream(s);
    }
  }
}

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

// Everything the forked child needs, prepared before fork() so the child
// does not allocate.
struct ChildSpec {
  int out_w, err_w;
  pid_t launcher;
  sigset_t mask;  // signal mask to restore (the launcher's, before blocking)
  char** argv;
  char** envp;
};

void write_cstr(int fd, const char* s) {
  [[maybe_unused]] ssize_t r = ::write(fd, s, std::strlen(s));
}

[[noreturn]] void exec_child(const ChildSpec& c) {
  restore_saved_actions();
  ::sigprocmask(SIG_SETMASK, &c.mask, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != c.launcher) ::_exit(1);  // launcher died before prctl took effect
  ::dup2(c.out_w, STDOUT_FILENO);
  ::dup2(c.err_w, STDERR_FILENO);
  environ = c.envp;
  ::execvp(c.argv[0], c.argv);
  const int err = errno;
  write_cstr(STDERR_FILENO, "megacpp-run: cannot execute '");
  write_cstr(STDERR_FILENO, c.argv[0]);
  write_cstr(STDERR_FILENO, "': ");
  write_cstr(STDERR_FILENO, std::strerror(err));
  write_cstr(STDERR_FILENO, "\n");
  ::_exit(127);
}

void close_pair(int p[2]) {
  ::close(p[0]);
  ::close(p[1]);
}

// Forks one rank with its stdout/stderr on fresh pipes. Throws on failure.
void spawn_rank(Rank& r, char** argv, char** envp) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw sys_error("pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    close_pair(out);
    throw sys_error("pipe");
  }
  // Blocked across fork so the child cannot run the launcher's handler
  // before it restores the original dispositions.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &block, &old);
  const ChildSpec spec{out[1], err[1], ::getpid(), old, argv, envp};
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(spec);
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    close_pair(out);
    close_pair(err);
    errno = fork_errno;
    throw sys_error("fork");
  }
  ::close(out[1]);
  ::close(err[1]);
  r.pid = pid;
  r.running = true;
  r.out.fd = out[0];
  r.err.fd = err[0];
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
}

std::string describe_exit(const Rank& r, int status) {
  const std::string who = "rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + ")";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return who + " was killed by signal " + signal_name(sig) + " (" + std::to_string(sig) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

// ------------------------------------------------------------- supervisor --

class Supervisor {
 public:
  Supervisor(const LaunchOptions& opts, int port, int signal_fd)
      : opts_(opts), port_(port), signal_fd_(signal_fd),
        hang_watch_(opts.hang_timeout_seconds > 0 ? std::make_unique<HangWatch>(opts.hang_timeout_seconds) : nullptr) {}

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
      std::vector<std::string> env = rank_environment(opts_, l, port_, hang_watch_ ? hang_watch_->file_for(r.rank) : "");
      std::vector<char*> envp = c_array(env);
      try {
        spawn_rank(r, argv.data(), envp.data());
      } catch (const std::exception& e) {
        say("failed to start rank " + std::to_string(r.rank) + ": " + e.what());
        failed_rank_ = r.rank;
        start_teardown(SIGTERM);
        return;
      }
      if (hang_watch_) hang_watch_->watch(r.rank, r.pid);
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
    if (!hang_watch_ || stopping_ || Clock::now() < next_progress_check_) return;
    next_progress_check_ = Clock::now() + std::chrono::seconds(1);
    if (auto report = hang_watch_->check()) {
      say(*report + "; stopping the job");
      hung_ = true;
      start_teardown(SIGTERM);
    }
  }

  void on_exit(Rank& r, int status) {
    r.running = false;
    if (hang_watch_) hang_watch_->forget(r.rank);
    // Print what the rank wrote before it died ahead of the failure message.
    pump(r.out, 64);
    pump(r.err, 64);
    // A terminal's Ctrl-C (or any signal to the whole process group) reaches the launcher
    // and the ranks together. The launcher's handler has run by now (the signal was pending
    // before the rank could die), but poll_once() may not have read its byte yet: do it
    // first, so a rank dying of that signal counts as the interrupt, not as a failure.
    if (!stopping_) drain_signals();
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || stopping_) return;
    say(describe_exit(r, status));
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
  std::unique_ptr<HangWatch> hang_watch_;  // null with --hang-timeout-seconds 0
  Clock::time_point next_progress_check_{};
  bool hung_ = false;
  int failed_rank_ = -1;
  int got_signal_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_{};
};

}  // namespace

// ------------------------------------------------------------- public API --

LaunchOptions parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions opts;
  size_t i = 0;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // PROGRAM: the rest belongs to it
    ++i;
    if (!apply_option(opts, split_option(arg), args, i)) return opts;
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  validate_launch_options(opts);
  return opts;
}

LaunchOptions parse_launch_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_launch_options(args);
}

void validate_launch_options(const LaunchOptions& opts) {
  for (const IntFlag& f : kIntFlags) {
    const int v = opts.*(f.field);
    if (v < f.lo || v > f.hi)
      throw std::invalid_argument(std::string(f.name) + ": expected " + range_text(f.lo, f.hi) +
                                  ", got " + std::to_string(v));
  }
  if (opts.node_rank >= opts.nnodes)
    throw std::invalid_argument("--node-rank: " + std::to_string(opts.node_rank) +
                                " must be less than --nnodes (" + std::to_string(opts.nnodes) +
                                ")");
  if (opts.master_port == 0 && opts.nnodes > 1)
    throw std::invalid_argument(
        "--master-port: 0 (pick a free port) is only allowed with --nnodes 1");
  if (opts.master_addr.empty()) throw std::invalid_argument("--master-addr: must not be empty");
  if (opts.command.empty()) throw std::invalid_argument("missing PROGRAM to run");
}

std::string launch_usage() {
  return R"(usage: megacpp-run [options] PROGRAM [ARGS...]

Starts one process per local rank with the torchrun environment (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR,
MASTER_PORT). Output lines are prefixed with "[rank<R>]: ". When a rank fails
the others get SIGTERM, then SIGKILL after the grace period.

options (also --opt=VALUE and underscore spellings such as --nproc_per_node):
  --nproc-per-node N   processes on this node (default 1)
  --nnodes N           number of nodes (default 1)
  --node-rank R        rank of this node, 0 <= R < nnodes (default 0)
  --master-addr ADDR   rendezvous address (default 127.0.0.1)
  --master-port P      rendezvous port (default 29500; 0 picks a free port,
                       single node only)
  --grace-seconds S    wait after SIGTERM before SIGKILL on teardown (default 5)
  --omp-num-threads N  OMP_NUM_THREADS of every rank (default: the environment's,
                       else 1 when --nproc-per-node > 1, as torchrun); ranks also
                       get OMP_WAIT_POLICY=PASSIVE unless it is set
  --hang-timeout-seconds S
                       stop the job when a rank of megacpp-train makes no progress
                       for S seconds, naming it (default 300; 0: off)
  -h, --help           show this help
  --                   end of options: the next token is PROGRAM

exit status: 0 if every rank exits 0, 1 if a rank fails, 2 on usage errors,
128+N if the launcher receives signal N.
)";
}

std::vector<std::pair<std::string, std::string>> thread_environment(const LaunchOptions& opts) {
  std::vector<std::pair<std::string, std::string>> vars;
  if (opts.omp_num_threads > 0) {
    vars.emplace_back("OMP_NUM_THREADS", std::to_string(opts.omp_num_threads));
  } else if (std::getenv("OMP_NUM_THREADS") == nullptr && opts.nproc_per_node > 1) {
    vars.emplace_back("OMP_NUM_THREADS", "1");
  }
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) vars.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  return vars;
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw sys_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int saved_errno = errno;
  ::close(fd);
  errno = saved_errno;
  if (!ok) throw sys_error("picking a free port");
  return ntohs(addr.sin_port);
}

int run_launcher(const LaunchOptions& opts) {
  validate_launch_options(opts);
  ensure_std_fds_open();
  const int port = opts.master_port != 0 ? opts.master_port : pick_free_port();
  if (opts.omp_num_threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr && opts.nproc_per_node > 1) {
    say("OMP_NUM_THREADS is 1 for each of the " + std::to_string(opts.nproc_per_node) +
        " ranks (not set; --omp-num-threads N or OMP_NUM_THREADS=N to change it)");
  }
  SignalGuard guard;
  return Supervisor(opts, port, guard.read_fd()).run();
}

}  // namespace megacpp::launch
