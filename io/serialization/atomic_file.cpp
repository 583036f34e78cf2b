#include "io/serialization/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "megacpp/errors.h"

namespace megacpp::io::serialization {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) throw std::runtime_error("cannot create '" + tmp_ + "': " + errno_text());
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (n == 0) return;
  if (std::fwrite(data, 1, n, file_) != n) throw std::runtime_error("cannot write '" + tmp_ + "': " + errno_text());
}

void AtomicFile::commit() {
  bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
  const std::string err = ok ? "" : errno_text();
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (!ok) {
    std::remove(tmp_.c_str());
    throw std::runtime_error("cannot write '" + tmp_ + "': " + (err.empty() ? errno_text() : err));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string e = errno_text();
    std::remove(tmp_.c_str());
    throw std::runtime_error("cannot rename '" + tmp_ + "' to '" + path_ + "': " + e);
  }
  fsync_directory(std::filesystem::path(path_).parent_path().string());
}

void fsync_directory(const std::string& dir) {
  const std::string path = dir.empty() ? "." : dir;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw std::runtime_error("cannot open directory '" + path + "' to sync it: " + errno_text());
  const bool ok = ::fsync(fd) == 0;
  const std::string err = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot sync directory '" + path + "': " + err);
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace megacpp::io::serialization
