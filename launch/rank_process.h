// The launcher's side of one rank's process: starting it with its output on pipes, relaying
// that output line by line under a "[rank<R>]: " prefix, describing how it ended, and the
// signal handling around it (a self-pipe that wakes the supervisor's poll loop).
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace megacpp::launch {

// How long the supervisor's poll() and a blocked write wait at most.
constexpr int kPollMs = 100;

// Writes all of `s`, retrying on EINTR and waiting on a full non-blocking fd.
void write_all(int fd, const std::string& s);
// "megacpp-run: <msg>" on stderr.
void say(const std::string& msg);
std::string signal_name(int sig);
// `what` with errno's text.
std::runtime_error sys_error(const std::string& what);

// Installs handlers for SIGINT, SIGTERM and SIGCHLD for the launcher's lifetime. SIGCHLD wakes
// poll() as soon as a rank exits, and catching it keeps an inherited SIG_IGN from auto-reaping
// the ranks and hiding their exit status.
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  // Readable when a handled signal arrived: one byte per signal, its number.
  int read_fd() const;
};

// A closed stdin/stdout/stderr would let pipe2() hand out fds 0-2 and confuse
// the dup2() calls in the child.
void ensure_std_fds_open();

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

// Reads what is available (at most max_reads chunks, so one chatty rank
// cannot starve the others); closes the stream at EOF.
void pump(Stream& s, int max_reads);
// Emits an unfinished last line and closes the pipe.
void close_stream(Stream& s);

// Forks one rank running argv with envp, its stdout/stderr on fresh pipes. Throws on failure.
void spawn_rank(Rank& r, char** argv, char** envp);

// "rank R (pid P) exited with status S" / "... was killed by signal SIGX (N)".
std::string describe_exit(const Rank& r, int status);

}  // namespace megacpp::launch
