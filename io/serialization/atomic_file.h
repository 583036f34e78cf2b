// Files readers never see half-written: written to PATH.tmp, fsync'ed, then renamed onto PATH.
// Also the shape text every checkpoint error message uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace megacpp::io::serialization {

class AtomicFile {
 public:
  // Creates PATH.tmp; throws std::runtime_error naming it when it cannot.
  explicit AtomicFile(std::string path);
  // Without commit(), the temporary is removed and PATH is left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t n);
  // fsync, close, rename onto PATH and fsync PATH's directory (so the rename survives a power
  // loss); throws naming the file on failure.
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
};

// fsync()s directory `dir`, making the renames and creations in it durable. Throws naming it.
void fsync_directory(const std::string& dir);

// The whole of `bytes` as PATH, atomically.
void write_file_atomically(const std::string& path, const std::string& bytes);

// "[2, 3]".
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace megacpp::io::serialization
