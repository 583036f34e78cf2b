#include "checkpoint/save_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

namespace megacpp::checkpoint {
namespace {

std::string holder_line() {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return "host " + std::string(host) + ", pid " + std::to_string(getpid()) + ", since " + when;
}

std::string read_holder(int fd) {
  char buffer[512] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "unknown holder";
}

}  // namespace

std::string SaveDirectoryLock::lock_path(const std::string& root) {
  return (std::filesystem::path(root) / ".megacpp_save.lock").string();
}

SaveDirectoryLock::SaveDirectoryLock(const std::string& root) {
  const std::string path = lock_path(root);
  try {
    std::filesystem::create_directories(root);
  } catch (const std::exception& e) {
    throw std::runtime_error("--save: cannot create " + root + ": " + e.what());
  }
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("--save: cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw std::runtime_error("--save " + root + " is in use by another job (" + holder +
                               "): two jobs saving to one directory would overwrite each other's checkpoints; "
                               "give this one another --save");
    }
    throw std::runtime_error("--save: cannot lock " + path + ": " + std::strerror(error));
  }
  const std::string line = holder_line();
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    const std::string error = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("--save: cannot write " + path + ": " + error);
  }
}

SaveDirectoryLock::~SaveDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the file stays (removing it would race a new holder)
}

}  // namespace megacpp::checkpoint
