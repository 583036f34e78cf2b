// Group creation that every member agrees on: a rank failing to connect makes all of them
// connect again, and a group that never connects fails on every member naming the rank at fault.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include "parallel/agreed_connect.h"
#include "parallel/collectives.h"
#include "parallel/distributed_runtime.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

parallel::Group unconnected_world(const parallel::DistributedRuntime& rt) {
  parallel::Group group = rt.world();
  group.backend.reset();
  return group;
}

// A real Gloo backend under `prefix`: over the world, or over this rank alone.
c10::intrusive_ptr<parallel::compat::CommBackend> gloo_backend(const parallel::DistributedRuntime& rt, const std::string& prefix,
                                                               bool alone = false) {
  auto options = c10d::ProcessGroupGloo::Options::create(rt.timeout());
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto store = c10::make_intrusive<c10d::PrefixStore>(alone ? prefix + "_" + std::to_string(rt.rank()) : prefix, rt.store());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, alone ? 0 : rt.rank(), alone ? 1 : rt.world_size(), options);
}

TEST(AgreedConnect, OneRankFailingMakesEveryMemberConnectAgain) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    std::vector<std::string> attempts;
    parallel::Group group = unconnected_world(rt);
    group.backend = parallel::connect_agreed(*rt.store(), "agreed", group, [&](const std::string& prefix) {
      attempts.push_back(prefix);
      auto backend = gloo_backend(rt, prefix);
      // Rank 1's first attempt fails after its peers' succeeded, as when one side of a pair took
      // a stray connection for its peer.
      if (rt.rank() == 1 && attempts.size() == 1) throw std::runtime_error("a stray connection");
      return backend;
    });
    EXPECT_EQ(attempts, (std::vector<std::string>{"agreed", "agreed_attempt_2"}));
    at::Tensor x = torch::full({2}, static_cast<float>(rt.rank() + 1));
    parallel::all_reduce(group, x, parallel::ReduceOp::kSum).wait();
    EXPECT_TRUE(x.equal(torch::full({2}, 6.0f))) << "the agreed backend connects every member";
  });
}

TEST(AgreedConnect, MembersWhoseContributionsGoAstrayConnectAgain) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    int attempts = 0;
    parallel::Group group = unconnected_world(rt);
    group.backend = parallel::connect_agreed(*rt.store(), "astray", group, [&](const std::string& prefix) {
      // The first time each rank's backend reaches only itself: every one of them connects, but
      // the check's all-reduce misses the other members.
      return gloo_backend(rt, prefix, ++attempts == 1);
    });
    EXPECT_EQ(attempts, 2);
    at::Tensor x = torch::full({1}, 1.0f);
    parallel::all_reduce(group, x, parallel::ReduceOp::kSum).wait();
    EXPECT_EQ(x.item<float>(), 3.0f);
  });
}

TEST(AgreedConnect, AGroupThatNeverConnectsFailsOnEveryMemberNamingTheRank) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    int attempts = 0;
    parallel::AgreedConnectOptions options;
    options.attempts = 2;
    try {
      parallel::connect_agreed(*rt.store(), "never", unconnected_world(rt), [&](const std::string&) {
        ++attempts;
        if (rt.rank() == 2) throw std::runtime_error("no route to the peer");
        return c10::intrusive_ptr<parallel::compat::CommBackend>();
      }, options);
      ADD_FAILURE() << "rank " << rt.rank() << " must fail with the group";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "connecting the group of ranks [0, 1, 2] failed 2 times; the last time: rank 2: no route to the peer");
    }
    EXPECT_EQ(attempts, 2);
  });
}

TEST(AgreedConnect, AMemberThatNeverReportsIsNamed) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    if (rt.rank() == 1) return;  // never takes part
    parallel::AgreedConnectOptions options;
    options.outcome_timeout = std::chrono::milliseconds(500);
    try {
      parallel::connect_agreed(*rt.store(), "silent", unconnected_world(rt), [](const std::string&) {
        return c10::intrusive_ptr<parallel::compat::CommBackend>();
      }, options);
      ADD_FAILURE() << "rank 1 never reported";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "connecting the group of ranks [0, 1]: rank(s) 1 did not report within 500 ms (stopped or stalled?)");
    }
  });
}

// Rank 1 of 2 alone at a store nobody else joins: it names rank 0 when the timeout passes.
TEST(Rendezvous, ARankThatNeverStartsIsNamed) {
  auto store = testing::host_store();
  parallel::LaunchEnvironment env;
  env.rank = 1;
  env.world_size = 2;
  env.master_port = static_cast<std::uint16_t>(store->getPort());
  parallel::RuntimeOptions options;
  options.rank0_hosts_store = false;
  options.force_cpu = true;
  options.timeout = std::chrono::seconds(2);
  try {
    parallel::DistributedRuntime::initialize(env, options);
    ADD_FAILURE() << "rank 0 never joined";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "rendezvous at MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(env.master_port) +
                                         ": rank(s) 0 did not join within --distributed-timeout-minutes (2000 ms; is every node started?)");
  }
}

}  // namespace
}  // namespace megacpp
