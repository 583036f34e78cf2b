#include "hang_watch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace megacpp::launch {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The state letter of /proc/PID/stat (R, S, D, T, t, Z, ...), or '?'.
char process_state(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

bool is_stopped(pid_t pid) {
  const char state = process_state(pid);
  return state == 'T' || state == 't';
}

}  // namespace

HangWatch::HangWatch(int timeout_seconds) : timeout_seconds_(timeout_seconds) {
  std::string pattern = (std::filesystem::temp_directory_path() / "megacpp-run-heartbeat-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a heartbeat directory for hang detection in " +
                             std::filesystem::temp_directory_path().string() + ": " + std::strerror(errno));
  }
  dir_ = pattern;
}

HangWatch::~HangWatch() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string HangWatch::file_for(int rank) const { return dir_ + "/rank_" + std::to_string(rank); }

void HangWatch::watch(int rank, pid_t pid) { ranks_.push_back({rank, pid, "", Clock::now()}); }

void HangWatch::forget(int rank) {
  ranks_.erase(std::remove_if(ranks_.begin(), ranks_.end(), [&](const Watched& w) { return w.rank == rank; }), ranks_.end());
}

std::string HangWatch::describe(const Watched& w, Clock::time_point now) const {
  const auto idle = std::chrono::duration_cast<std::chrono::seconds>(now - w.last_progress).count();
  const size_t space = w.last_beat.find(' ');
  const std::string phase = space == std::string::npos ? w.last_beat : w.last_beat.substr(space + 1);
  return "rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.pid) + ", " +
         (is_stopped(w.pid) ? "stopped by a signal" : "state " + std::string(1, process_state(w.pid))) + ") " +
         (phase.empty() ? std::string("before its first heartbeat") : "in '" + phase + "'") + " for " + std::to_string(idle) + " s";
}

void HangWatch::read_beats(Clock::time_point now) {
  for (Watched& w : ranks_) {
    const std::string beat = read_file(file_for(w.rank));
    if (beat != w.last_beat) {
      w.last_beat = beat;
      w.last_progress = now;
    }
  }
}

std::optional<std::string> HangWatch::check() {
  const Clock::time_point now = Clock::now();
  const auto timeout = std::chrono::seconds(timeout_seconds_);
  read_beats(now);
  // Only a rank that has reported progress is watched: the program may not be megacpp-train.
  const bool hung = timeout_seconds_ > 0 && std::any_of(ranks_.begin(), ranks_.end(), [&](const Watched& w) {
                      return !w.last_beat.empty() && now - w.last_progress >= timeout;
                    });
  if (!hung) return std::nullopt;
  std::vector<const Watched*> at_fault, waiting;
  for (const Watched& w : ranks_) {
    if (is_stopped(w.pid)) {
      at_fault.push_back(&w);  // even before its first heartbeat: the others may be waiting for it to join
    } else if (!w.last_beat.empty()) {
      waiting.push_back(&w);
    }
  }
  if (at_fault.empty()) {  // nothing stopped: every rank without progress for the timeout
    for (const Watched* w : waiting) {
      if (now - w->last_progress >= timeout) at_fault.push_back(w);
    }
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(), [&](const Watched* w) { return now - w->last_progress >= timeout; }),
                  waiting.end());
  }
  std::string report = "no progress for --hang-timeout-seconds " + std::to_string(timeout_seconds_) + ": ";
  for (size_t i = 0; i < at_fault.size(); ++i) report += (i ? "; " : "") + describe(*at_fault[i], now);
  if (!waiting.empty()) {
    report += ". Waiting for it: ";
    for (size_t i = 0; i < waiting.size(); ++i) report += (i ? "; " : "") + describe(*waiting[i], now);
  }
  return report;
}

std::optional<std::string> HangWatch::behind(int failed_rank) {
  const Clock::time_point now = Clock::now();
  read_beats(now);
  const auto failed = std::find_if(ranks_.begin(), ranks_.end(), [&](const Watched& w) { return w.rank == failed_rank; });
  if (failed == ranks_.end() || failed->last_beat.empty()) return std::nullopt;
  // Every rank beats the same phases in the same order, so the counts compare.
  const auto beats = [](const Watched& w) { return std::strtoull(w.last_beat.c_str(), nullptr, 10); };
  std::string report;
  for (const Watched& w : ranks_) {
    if (w.rank == failed_rank || (w.last_beat.empty() && !is_stopped(w.pid))) continue;
    if (is_stopped(w.pid) || beats(w) < beats(*failed)) report += (report.empty() ? "" : "; ") + describe(w, now);
  }
  if (report.empty()) return std::nullopt;
  return report;
}

}  // namespace megacpp::launch
