#include "port_claim.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "rank_process.h"

namespace megacpp::launch {
namespace {

// The rendezvous this node takes part in. On the master (node 0) rank 0 binds the port on every
// address of this host, so the port alone names it; a node that only connects names its master.
std::string claim_name(const std::string& master_addr, int port, int nnodes, int node_rank) {
  std::string name = "megacpp-run/master-port/" + std::to_string(port);
  if (nnodes > 1 && node_rank > 0) name += "/master/" + master_addr + "/node/" + std::to_string(node_rank);
  return name;
}

sockaddr_un abstract_address(const std::string& name, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);  // sun_path[0] == '\0': the abstract namespace
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

// The pid of the process listening on `name`, or -1 when none answers (it has just ended).
pid_t holder_of(const sockaddr_un& addr, socklen_t length) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  pid_t pid = -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length) == 0) {
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0) pid = peer.pid;
  }
  ::close(fd);
  return pid;
}

}  // namespace

PortClaim::PortClaim(const std::string& master_addr, int port, int nnodes, int node_rank) {
  socklen_t length = 0;
  const sockaddr_un addr = abstract_address(claim_name(master_addr, port, nnodes, node_rank), &length);
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second try when the holder ended meanwhile
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw sys_error("socket for claiming --master-port " + std::to_string(port));
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), length) == 0 && ::listen(fd_, 8) == 0) return;
    const int bind_errno = errno;
    ::close(fd_);
    fd_ = -1;
    if (bind_errno != EADDRINUSE) {
      errno = bind_errno;
      throw sys_error("claiming --master-port " + std::to_string(port) + " on this host");
    }
    const pid_t holder = holder_of(addr, length);
    if (holder < 0) continue;
    throw std::runtime_error("--master-port " + std::to_string(port) + " is taken on this host by another job's megacpp-run (pid " +
                             std::to_string(holder) + "): its ranks would join that job's rendezvous; no rank of this job was "
                             "started. Give this job another port (--master-port 0 picks a free one)");
  }
  throw std::runtime_error("--master-port " + std::to_string(port) + " could not be claimed on this host: another megacpp-run "
                           "took and left it twice meanwhile; start this job again");
}

PortClaim::~PortClaim() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace megacpp::launch
