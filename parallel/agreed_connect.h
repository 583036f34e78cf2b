// Connecting one group's backend so that its members agree on the outcome.
//
// Gloo takes any connection that arrives at a pair's listening port with the expected (small)
// sequence number for the peer, and ephemeral ports are reused: a stray dial (another job's
// rank calling the port's previous owner) can be adopted in place of the peer. One side then
// fails while the other believes the pair is up, or both believe it and the first collective
// waits out its timeout. So each member checks, with one small all-reduce, that every member's
// contribution arrives (a pair broken on both sides costs that all-reduce the backend's
// timeout; on NCCL a hung check ends as any NCCL hang does, by its watchdog), reports its
// outcome in the store and waits for the others'; if any member failed, all of them drop what
// they built and connect again under a fresh store prefix, a bounded number of times, with a
// warning each time.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <c10/core/Device.h>

#include "parallel/compat.h"
#include "parallel/group.h"

namespace c10d {
class Store;
}

namespace megacpp::parallel {

// Builds the backend under a store prefix; throws when it cannot connect.
using ConnectBackend = std::function<c10::intrusive_ptr<compat::CommBackend>(const std::string& prefix)>;

struct AgreedConnectOptions {
  int attempts = 3;
  // How long a member waits for the others' outcomes after giving its own. A peer may spend
  // the backend's timeout connecting (waiting for a rank that has already failed) and another
  // on the check, so this is at least three times the backend's timeout.
  std::chrono::milliseconds outcome_timeout = std::chrono::minutes(30);
  c10::Device device{c10::kCPU};  // where the backend's tensors live (CUDA for NCCL)
};

// Collective over the members of `group` (its backend not yet set). Returns the backend of the
// first attempt in which every member connected and reached the others (a null backend from
// `connect` is taken as connected, unchecked); throws naming the ranks that failed and their
// errors when the attempts are spent, or the ranks that never reported.
c10::intrusive_ptr<compat::CommBackend> connect_agreed(c10d::Store& store, const std::string& prefix, const Group& group,
                                                       const ConnectBackend& connect,
                                                       const AgreedConnectOptions& options = {});

}  // namespace megacpp::parallel
