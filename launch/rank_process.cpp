#include "rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>

extern char** environ;

namespace megacpp::launch {
namespace {

// A "line" this long without a newline is emitted anyway to bound memory.
constexpr size_t kMaxLine = size_t{1} << 20;

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

}  // namespace

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

SignalGuard::SignalGuard() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw sys_error("pipe");
  for (size_t i = 0; i < kNumHandled; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_launcher_signal;
    sa.sa_flags = SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    ::sigaction(kHandledSignals[i], &sa, &g_saved_actions[i]);
  }
}

SignalGuard::~SignalGuard() {
  restore_saved_actions();
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

int SignalGuard::read_fd() const { return g_signal_pipe[0]; }

void ensure_std_fds_open() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) == -1) ::open("/dev/null", O_RDWR);
}

namespace {

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

}  // namespace

void close_stream(Stream& s) {
  if (!s.pending.empty()) write_all(s.dest, s.prefix + s.pending + "\n");
  s.pending.clear();
  ::close(s.fd);
  s.fd = -1;
}

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

namespace {

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

}  // namespace

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

}  // namespace megacpp::launch
