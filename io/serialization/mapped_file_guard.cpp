#include "io/serialization/mapped_file_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace megacpp::io::serialization {
namespace {

constexpr int kGuardSlots = 4096;
constexpr std::size_t kGuardPathBytes = 512;

// Written before `begin` is published (release), read by the handler after it (acquire).
struct GuardSlot {
  std::atomic<std::uintptr_t> begin{0};
  std::size_t size = 0;
  char path[kGuardPathBytes] = {};
};
GuardSlot guard_slots[kGuardSlots];
std::mutex guard_claim_mutex;
struct sigaction previous_sigbus_action;

// Async-signal-safe output: write(2) of a string and of a decimal number.
void say_to_stderr(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}
void say_number_to_stderr(std::uintptr_t value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 24);
  char text[25];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  text[n] = '\0';
  say_to_stderr(text);
}

// This thread's MappedReadScopes, innermost last. Plain data in static TLS: the handler reads it
// on the thread that faulted.
constexpr int kReadScopes = 4;
struct ReadScopes {
  const char* kind[kReadScopes];
  const char* name[kReadScopes];  // nullptr: `index` names it
  int64_t index[kReadScopes];
  int depth;
};
thread_local ReadScopes read_scopes;

void say_read_scopes() {
  const int named = std::min(read_scopes.depth, kReadScopes);
  for (int i = 0; i < named; ++i) {
    say_to_stderr(i == 0 ? " while reading " : ", ");
    say_to_stderr(read_scopes.kind[i]);
    say_to_stderr(" ");
    if (read_scopes.name[i] != nullptr) {
      say_to_stderr(read_scopes.name[i]);
    } else {
      say_number_to_stderr(static_cast<std::uintptr_t>(read_scopes.index[i]));
    }
  }
}

void push_read_scope(const char* kind, const char* name, int64_t index) {
  if (read_scopes.depth < kReadScopes) {
    read_scopes.kind[read_scopes.depth] = kind;
    read_scopes.name[read_scopes.depth] = name;
    read_scopes.index[read_scopes.depth] = index;
  }
  ++read_scopes.depth;
}

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const GuardSlot& slot : guard_slots) {
    const std::uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= begin + slot.size) continue;
    say_to_stderr("megacpp: ");
    say_to_stderr(slot.path);
    say_to_stderr(": reading byte ");
    say_number_to_stderr(address - begin);
    say_to_stderr(" of it failed (SIGBUS)");
    say_read_scopes();
    say_to_stderr(": the file is shorter than when it was opened (truncated or rewritten while in use); "
        "this rank stops\n");
    ::_exit(1);
  }
  if (previous_sigbus_action.sa_flags & SA_SIGINFO) {
    if (previous_sigbus_action.sa_sigaction) return previous_sigbus_action.sa_sigaction(signal, info, context);
  } else if (previous_sigbus_action.sa_handler != SIG_DFL && previous_sigbus_action.sa_handler != SIG_IGN) {
    return previous_sigbus_action.sa_handler(signal);
  }
  ::signal(SIGBUS, SIG_DFL);  // the fault repeats on return, now fatal as it would have been
}

void install_sigbus_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &previous_sigbus_action);
}

}  // namespace

MappedFileGuard::MappedFileGuard(const void* begin, std::size_t size, const std::string& path) {
  if (begin == nullptr || size == 0) return;
  static std::once_flag installed;
  std::call_once(installed, install_sigbus_handler);
  std::lock_guard<std::mutex> lock(guard_claim_mutex);
  for (int i = 0; i < kGuardSlots; ++i) {
    if (guard_slots[i].begin.load(std::memory_order_relaxed) != 0) continue;
    guard_slots[i].size = size;
    const std::size_t n = std::min(path.size(), kGuardPathBytes - 1);
    std::memcpy(guard_slots[i].path, path.data(), n);
    guard_slots[i].path[n] = '\0';
    guard_slots[i].begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_release);
    slot_ = i;
    return;
  }
}

MappedFileGuard::~MappedFileGuard() {
  if (slot_ >= 0) guard_slots[slot_].begin.store(0, std::memory_order_release);
}

MappedReadScope::MappedReadScope(const char* kind, int64_t index) { push_read_scope(kind, nullptr, index); }
MappedReadScope::MappedReadScope(const char* kind, const char* name) { push_read_scope(kind, name, 0); }
MappedReadScope::~MappedReadScope() { --read_scopes.depth; }

}  // namespace megacpp::io::serialization
