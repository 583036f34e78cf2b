// Note [One job per port]
// A job started on a port a running job uses must not disturb it. Its rank 0 cannot host the
// rendezvous store there, but its other ranks would reach the running job's store and, when
// they get there before that job's own ranks, take their places. So each megacpp-run claims its
// rendezvous on this host before it starts any rank: an abstract Unix socket named after the
// port (and, on a node other than the master, the master's address and the node rank), which
// the kernel releases when the launcher ends, however it ends. A second launcher finds the name
// taken, asks the holder's socket who it is (SO_PEERCRED) and refuses before starting a rank;
// of two started at the same instant, exactly one gets the name. Ranks started by another
// launcher are still turned away by the rendezvous itself (parallel/distributed_runtime.cpp).
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace megacpp::launch {

// What PortClaim throws when another launcher on this host holds the rendezvous.
struct PortTaken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PortClaim {
 public:
  // Claims the rendezvous of (master_addr, port) as node `node_rank`; throws PortTaken naming the
  // port, the flag and the launcher that holds it, and std::runtime_error when the claim fails.
  PortClaim(const std::string& master_addr, int port, int nnodes, int node_rank);
  ~PortClaim();
  PortClaim(const PortClaim&) = delete;
  PortClaim& operator=(const PortClaim&) = delete;

 private:
  int fd_ = -1;
};

// Binds and listens on the abstract Unix socket `name`, which the kernel releases when the
// process ends. Returns its descriptor, or -1 with errno set (EADDRINUSE: another process holds it).
int listen_on_abstract_name(const std::string& name);

// Binds 127.0.0.1:0, reads the kernel-chosen port and closes the socket.
// Throws std::runtime_error on failure.
int pick_free_port();

// --master-port 0 on one node: a port `pick` calls free, claimed into `claim`, and returned.
// Between the pick and the claim the kernel can hand the same port to another launcher, whose
// ranks have not bound it yet; the launcher that loses the claim picks again, up to 16 times,
// rather than refuse a port its user never named.
int claim_free_port(const std::string& master_addr, std::optional<PortClaim>* claim,
                    const std::function<int()>& pick = pick_free_port);

}  // namespace megacpp::launch
