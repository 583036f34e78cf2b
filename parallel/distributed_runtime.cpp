#include "parallel/distributed_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/cuda.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "parallel/agreed_connect.h"
#include "parallel/store_values.h"

namespace megacpp::parallel {
namespace {

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  // A single-machine job must not depend on how this host's name resolves.
  if (is_loopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

std::string joined_key(int rank) { return "megacpp/joined/rank_" + std::to_string(rank); }

// Every rank joins the store before any connects, so that a rank that never starts is named.
void wait_for_every_rank(c10d::Store& store, const LaunchEnvironment& env, std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(joined_key(r));
  try {
    store.wait(keys, timeout);
  } catch (const std::exception&) {
    std::vector<int> absent;
    for (size_t r : absent_keys(store, keys)) absent.push_back(static_cast<int>(r));
    throw std::runtime_error("rendezvous at MASTER_ADDR=" + env.master_addr + " MASTER_PORT=" + std::to_string(env.master_port) + ": " +
                             (absent.empty() ? std::string("not every rank") : "rank(s) " + rank_list(absent)) +
                             " did not join within --distributed-timeout-minutes (" + std::to_string(timeout.count()) +
                             " ms; is every node started?)");
  }
}

}  // namespace

DistributedRuntime::DistributedRuntime(LaunchEnvironment env, RuntimeOptions options)
    : env_(std::move(env)), options_(options) {}

std::shared_ptr<DistributedRuntime> DistributedRuntime::initialize(const LaunchEnvironment& env,
                                                                   const RuntimeOptions& options) {
  std::shared_ptr<DistributedRuntime> rt(new DistributedRuntime(env, options));
#ifdef MEGACPP_WITH_CUDA
  if (!options.force_cpu && torch::cuda::is_available()) {
    int devices = static_cast<int>(torch::cuda::device_count());
    rt->device_ = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % devices));
  }
#endif
  std::vector<int> all(env.world_size);
  for (int r = 0; r < env.world_size; ++r) all[r] = r;
  if (!env.distributed()) {
    rt->world_ = Group::single(0);
    return rt;
  }
  c10d::TCPStoreOptions store_options;
  store_options.port = env.master_port;
  store_options.isServer = options.rank0_hosts_store && env.rank == 0 && !env.use_agent_store;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = options.timeout;
  try {
    rt->store_ = compat::make_tcp_store(env.master_addr, store_options);
    if (env.use_agent_store) {
      rt->store_ = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count), rt->store_);
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (store_options.isServer && (what.find("ddress already in use") != std::string::npos || what.find("EADDRINUSE") != std::string::npos)) {
      throw std::runtime_error("MASTER_PORT " + std::to_string(env.master_port) + " is already in use on this host (by another job?): rank 0 "
                               "cannot host the rendezvous store there; give another port (megacpp-run --master-port 0 picks a "
                               "free one)");
    }
    throw std::runtime_error("rendezvous at MASTER_ADDR=" + env.master_addr + " MASTER_PORT=" +
                             std::to_string(env.master_port) + " failed for rank " +
                             std::to_string(env.rank) + ": " + what);
  }
  // A second job started on the same port finds the first one's store: its ranks must leave
  // before they touch it (their Gloo connections would break the first job).
  if (rt->store_->add(joined_key(env.rank), 1) != 1) {
    throw std::runtime_error("the rendezvous store at MASTER_ADDR=" + env.master_addr + " MASTER_PORT=" + std::to_string(env.master_port) +
                             " already has a rank " + std::to_string(env.rank) +
                             ": it belongs to another job started on the same port; give this one another port (megacpp-run "
                             "--master-port 0 picks a free one)");
  }
  wait_for_every_rank(*rt->store_, env, options.timeout);
  try {
    rt->world_ = rt->new_group(all);
  } catch (const std::exception& e) {
    throw std::runtime_error("rendezvous at MASTER_ADDR=" + env.master_addr + " MASTER_PORT=" + std::to_string(env.master_port) +
                             ": rank " + std::to_string(env.rank) + " could not connect the world of " +
                             std::to_string(env.world_size) + " ranks: " + e.what());
  }
  spdlog::debug("rank {}/{} joined ({} via {}:{})", env.rank, env.world_size, env.source,
                env.master_addr, env.master_port);
  return rt;
}

c10::intrusive_ptr<compat::CommBackend> DistributedRuntime::make_backend(const std::string& prefix, int rank, int size,
                                                                         std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
#ifdef USE_C10D_NCCL
  if (device_.is_cuda()) {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, nccl_options);
  }
#endif
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
  gloo_options->devices.push_back(gloo_device(env_.master_addr));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
}

Group DistributedRuntime::new_group(const std::vector<int>& global_ranks, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = options_.timeout;
  const std::string prefix = "megacpp_group_" + std::to_string(groups_created_++);
  std::vector<int> ranks = global_ranks;
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty() || ranks.front() < 0 || ranks.back() >= world_size() ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw std::invalid_argument("new_group: ranks must be distinct and within the world of " +
                                std::to_string(world_size()));
  }
  Group group;
  group.global_ranks = ranks;
  auto it = std::find(ranks.begin(), ranks.end(), rank());
  group.rank = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  if (group.contains_me() && ranks.size() > 1) {
    AgreedConnectOptions agreement;
    agreement.outcome_timeout = 3 * timeout;
    agreement.device = device_;
    group.backend = connect_agreed(*store_, prefix, group,
                                   [&](const std::string& attempt_prefix) { return make_backend(attempt_prefix, group.rank, group.size(), timeout); },
                                   agreement);
  }
  return group;
}

void DistributedRuntime::barrier() {
  if (!world_.backend) return;
  auto work = world_.backend->barrier();
  work->wait();
}

}  // namespace megacpp::parallel
