#include "runtime/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace megacpp::runtime {

Heartbeat::Heartbeat() {
  const char* path = std::getenv("MEGACPP_HEARTBEAT_FILE");
  if (path == nullptr || *path == '\0') return;
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error(std::string("MEGACPP_HEARTBEAT_FILE: cannot open ") + path + ": " + std::strerror(errno));
}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::beat(const std::string& phase) {
  phase_ = phase;
  if (fd_ < 0) return;
  // "COUNT PHASE": the launcher sees progress as a change of the file. A torn read is only
  // another change; a failed write is not worth stopping training for.
  const std::string line = std::to_string(++count_) + " " + phase;
  if (::pwrite(fd_, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size())) {
    (void)!::ftruncate(fd_, static_cast<off_t>(line.size()));
  }
}

}  // namespace megacpp::runtime
