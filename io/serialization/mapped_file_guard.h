// A memory-mapped file that shrinks under its reader (truncated or rewritten while a job trains
// on it) makes the next read of a vanished page raise SIGBUS, which would kill the rank with no
// file named. Each mapping registers its range here; a SIGBUS inside one prints the file, the
// offset, what the thread was reading (MappedReadScope: a sample, a sequence, an image, a
// tensor) and what happened, and exits with status 1 (megacpp-run then stops the other ranks).
// A SIGBUS anywhere else goes to the handler that was there before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megacpp::io::serialization {

class MappedFileGuard {
 public:
  // Guards [begin, begin + size), the mapping of `path`. At most 4096 at once; more are not guarded.
  MappedFileGuard(const void* begin, std::size_t size, const std::string& path);
  ~MappedFileGuard();
  MappedFileGuard(const MappedFileGuard&) = delete;
  MappedFileGuard& operator=(const MappedFileGuard&) = delete;

 private:
  int slot_ = -1;  // -1: not guarded (no mapping, or no free slot)
};

// While alive, names what this thread reads from guarded mappings, for the SIGBUS message:
// ("sample", 7) inside ("sequence", 12) reads "while reading sample 7, sequence 12". Scopes nest
// up to 4 deep (deeper ones are not named). `kind` and `name` must outlive the scope.
class MappedReadScope {
 public:
  MappedReadScope(const char* kind, int64_t index);
  MappedReadScope(const char* kind, const char* name);
  ~MappedReadScope();
  MappedReadScope(const MappedReadScope&) = delete;
  MappedReadScope& operator=(const MappedReadScope&) = delete;
};

}  // namespace megacpp::io::serialization
