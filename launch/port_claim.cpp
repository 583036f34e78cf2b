#include "port_claim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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

constexpr pid_t kHolderEnded = -1;
constexpr pid_t kHolderUnknown = 0;

// The pid of the process listening on `name`: kHolderEnded when none answers (it has just ended),
// kHolderUnknown when its queue is full. The holder never accepts, so each ask stays queued while
// it runs; a blocking connect would wait on a full queue for as long as that job trains.
pid_t holder_of(const std::string& name) {
  socklen_t length = 0;
  const sockaddr_un addr = abstract_address(name, &length);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return kHolderUnknown;
  pid_t pid = kHolderUnknown;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length) == 0) {
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0) pid = peer.pid;
  } else if (errno == ECONNREFUSED) {
    pid = kHolderEnded;
  }
  ::close(fd);
  return pid;
}

}  // namespace

PortClaim::PortClaim(const std::string& master_addr, int port, int nnodes, int node_rank) {
  const std::string name = claim_name(master_addr, port, nnodes, node_rank);
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second try when the holder ended meanwhile
    fd_ = listen_on_abstract_name(name);
    if (fd_ >= 0) return;
    if (errno != EADDRINUSE) throw sys_error("claiming --master-port " + std::to_string(port) + " on this host");
    const pid_t holder = holder_of(name);
    if (holder == kHolderEnded) continue;
    const std::string who = holder == kHolderUnknown ? "" : " (pid " + std::to_string(holder) + ")";
    throw PortTaken("--master-port " + std::to_string(port) + " is taken on this host by another job's megacpp-run" + who +
                    ": its ranks would join that job's rendezvous; no rank of this job was started. Give this job another "
                    "port (--master-port 0 picks a free one)");
  }
  throw std::runtime_error("--master-port " + std::to_string(port) + " could not be claimed on this host: another megacpp-run "
                           "took and left it twice meanwhile; start this job again");
}

PortClaim::~PortClaim() {
  if (fd_ >= 0) ::close(fd_);
}

int listen_on_abstract_name(const std::string& name) {
  socklen_t length = 0;
  const sockaddr_un addr = abstract_address(name, &length);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) == 0 && ::listen(fd, SOMAXCONN) == 0) return fd;
  const int saved_errno = errno;
  ::close(fd);
  errno = saved_errno;
  return -1;
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw sys_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int saved_errno = errno;
  ::close(fd);
  errno = saved_errno;
  if (!ok) throw sys_error("picking a free port");
  return ntohs(addr.sin_port);
}

int claim_free_port(const std::string& master_addr, std::optional<PortClaim>* claim, const std::function<int()>& pick) {
  constexpr int kAttempts = 16;
  for (int attempt = 1;; ++attempt) {
    const int port = pick();
    try {
      claim->emplace(master_addr, port, /*nnodes=*/1, /*node_rank=*/0);
      return port;
    } catch (const PortTaken&) {
      if (attempt == kAttempts) throw;
    }
  }
}

}  // namespace megacpp::launch
