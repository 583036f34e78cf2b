// Note [Hang detection]
// A rank that stops (SIGSTOP, a deadlock, a dead NFS mount) leaves the others waiting in a
// collective until --distributed-timeout-minutes runs out, and then the error names a rank that
// only waited. So megacpp-run gives each rank a heartbeat file ($MEGACPP_HEARTBEAT_FILE) that
// megacpp-train rewrites whenever it moves on (runtime/heartbeat.h); the launcher reads
// them as it polls. When a rank's file has not changed for --hang-timeout-seconds, the launcher
// names the rank at fault, with its pid and its last phase, and stops the job: a rank that is
// stopped (state T in /proc) if there is one (even one stopped before its first heartbeat, which
// the others wait for to join), else every rank that made no progress. A program that never
// writes its file (not megacpp-train) does not start the clock.
//
// Without --hang-timeout-seconds the files are written and read all the same, and only the
// job's end differs: the collective timeout (--distributed-timeout-minutes) fails a rank that
// waited, and when it does the launcher names the ranks it waited for with behind().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace megacpp::launch {

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // `timeout_seconds` >= 0 (0: check() never reports). Creates a private directory for the
  // heartbeat files.
  explicit HangWatch(int timeout_seconds);
  ~HangWatch();  // removes the directory
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // The heartbeat file of global rank `rank` (its MEGACPP_HEARTBEAT_FILE).
  std::string file_for(int rank) const;
  // Watches `rank`, running as `pid`.
  void watch(int rank, pid_t pid);
  void forget(int rank);  // the rank exited

  // Reads the heartbeat files; returns the report when a watched rank has made no progress for
  // the timeout (the job should stop), else nullopt.
  std::optional<std::string> check();
  // When `failed_rank` fails: the other ranks that are stopped by a signal or had not reached its
  // last phase (fewer heartbeats), described with their phase and how long they made no
  // progress; nullopt when there are none.
  std::optional<std::string> behind(int failed_rank);

 private:
  struct Watched {
    int rank;
    pid_t pid;
    std::string last_beat;            // the file's content: "COUNT PHASE"
    Clock::time_point last_progress;  // when it last changed
  };
  std::string describe(const Watched& w, Clock::time_point now) const;
  void read_beats(Clock::time_point now);

  int timeout_seconds_;
  std::string dir_;
  std::vector<Watched> ranks_;
};

}  // namespace megacpp::launch
