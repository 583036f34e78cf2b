// Rendezvous and process-group creation: the one place that talks to c10d's TCPStore and
// constructs Gloo or NCCL backends.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <c10/core/Device.h>

#include "parallel/group.h"
#include "parallel/launch_environment.h"

namespace c10d {
class Store;
}

namespace megacpp::parallel {

struct RuntimeOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // Rank 0 hosts the TCPStore; false when the store server lives elsewhere (tests host it in
  // the parent process so the port is known before any rank starts).
  bool rank0_hosts_store = true;
  // Force CPU/Gloo even where CUDA is available.
  bool force_cpu = false;
};

class DistributedRuntime {
 public:
  // Connects every rank (blocks until all have joined or the timeout passes).
  static std::shared_ptr<DistributedRuntime> initialize(const LaunchEnvironment& env,
                                                        const RuntimeOptions& options);

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  c10::Device device() const { return device_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  const Group& world() const { return world_; }
  // The job's key-value store (rendezvous), for agreeing on things outside collectives; null
  // for a process running alone (no launcher environment).
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

  // Creates a group over `global_ranks` whose collectives fail after `timeout` (the runtime's when
  // zero). Collective: every rank of the job must call it with the same arguments in the same
  // order, members or not (non-members get rank -1).
  Group new_group(const std::vector<int>& global_ranks, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  void barrier();

 private:
  DistributedRuntime(LaunchEnvironment env, RuntimeOptions options);
  c10::intrusive_ptr<compat::CommBackend> make_backend(const std::string& prefix, int rank, int size,
                                                       std::chrono::milliseconds timeout);

  LaunchEnvironment env_;
  RuntimeOptions options_;
  c10::Device device_{c10::kCPU};
  c10::intrusive_ptr<c10d::Store> store_;
  Group world_;
  int groups_created_ = 0;  // names each group's store prefix identically on every rank
};

}  // namespace megacpp::parallel
