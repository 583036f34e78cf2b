// A memory-mapped file that shrinks under its reader (truncated or rewritten while a job trains
// on it) makes the next read of a vanished page raise SIGBUS, which would kill the rank with no
// file named. Each mapping registers its range here; a SIGBUS inside one prints the file, the
// offset and what happened, and exits with status 1 (megacpp-run then stops the other ranks). A
// SIGBUS anywhere else goes to the handler that was there before.
#pragma once

#include <cstddef>
#include <string>

namespace megacpp::io::data {

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

}  // namespace megacpp::io::data
