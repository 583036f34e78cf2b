// The FSDP2 engine against an unsharded reference computed on every rank: gradients of
// uneven and tiny shapes, HSDP, frozen parameters, no-sync accumulation, prefetch (explicit
// and implicit), reduce-scatters overlapping the next backward, the gradient divide factor,
// recompute, freeing of gathered storage, mixed precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <torch/torch.h>

#include "models/layers/linear.h"
#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/engine_trace.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/storage.h"
#include "parallel/recompute.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

namespace fsdp = parallel::fsdp;

// x [batch, 4] -> tanh(L0) [5] -> tanh(L1) [2] -> L2 [3] -> * scale [3]. On 4 ranks dim 0 of
// 5, 2 and 3 rows splits 2/2/1/0, 1/1/0/0 and 1/1/1/0. `scale` belongs to the root group.
class Stack : public parallel::Module {
 public:
  Stack() : parallel::Module("Stack") {
    auto options = torch::TensorOptions().dtype(torch::kFloat);
    l0 = register_module("l0", std::make_shared<models::Linear>(4, 5, true, options));
    l1 = register_module("l1", std::make_shared<models::Linear>(5, 2, true, options));
    l2 = register_module("l2", std::make_shared<models::Linear>(2, 3, true, options));
    register_slot("scale", scale_, torch::empty({3}, options));
    torch::NoGradGuard no_grad;
    torch::manual_seed(7);
    for (auto& p : parameters()) p.copy_(torch::randn(p.sizes()));
  }
  std::shared_ptr<models::Linear> l0, l1, l2;

 protected:
  at::Tensor forward(const at::Tensor& x) override {
    return (*l2)(torch::tanh((*l1)(torch::tanh((*l0)(x))))) * scale_;
  }

 private:
  at::Tensor scale_;  // [3]
};

at::Tensor global_batch(int micro_step = 0) {
  torch::manual_seed(100 + micro_step);
  return torch::randn({8, 4});
}

at::Tensor local_batch(const parallel::DeviceMesh& mesh, int micro_step = 0) {
  const int64_t per_rank = 8 / mesh.data_parallel_size();
  return global_batch(micro_step).narrow(0, mesh.data_parallel_rank() * per_rank, per_rank);
}

at::Tensor loss_of(const at::Tensor& out) { return out.pow(2).mean(); }

// Every sharded gradient equals this rank's rows of the reference gradient.
void expect_grads_match(Stack& sharded, Stack& reference, const parallel::DeviceMesh& mesh,
                        double rtol = 1e-5, double atol = 1e-6) {
  auto ref = reference.named_parameters();
  const int rank = mesh.fsdp().rank;
  for (auto& item : sharded.named_parameters()) {
    fsdp::FSDPParam* p = fsdp::find_fsdp_param(item.value());
    ASSERT_NE(p, nullptr) << item.key() << " is not sharded";
    if (!item.value().requires_grad()) continue;
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    const auto& layout = p->layout();
    at::Tensor expected = ref[item.key()].grad().narrow(0, layout.first_row(rank), layout.rows_on(rank));
    EXPECT_TRUE(item.value().grad().allclose(expected, rtol, atol))
        << item.key() << "\n" << item.value().grad() << "\n" << expected;
  }
}

std::shared_ptr<Stack> reference_with_grads(int micro_steps = 1) {
  auto reference = std::make_shared<Stack>();
  for (int m = 0; m < micro_steps; ++m) (loss_of((*reference)(global_batch(m))) / micro_steps).backward();
  return reference;
}

// One forward/backward on this rank's part of the batch gives the reference's gradients.
void expect_step_matches_reference(Stack& model, const parallel::DeviceMesh& mesh) {
  loss_of(model(local_batch(mesh))).backward();
  expect_grads_match(model, *reference_with_grads(), mesh);
}

void shard_layers_and_root(Stack& model, const parallel::DeviceMesh& mesh, const fsdp::FullyShardOptions& options = {}) {
  fsdp::fully_shard(*model.l0, mesh, options);
  fsdp::fully_shard(*model.l1, mesh, options);
  fsdp::fully_shard(*model.l2, mesh, options);
  fsdp::fully_shard(model, mesh, options);
}

// A Stack sharded as shard_layers_and_root does, keeping the gathered parameters after
// forward unless `reshard_after_forward`.
std::shared_ptr<Stack> sharded_stack(const parallel::DeviceMesh& mesh, bool reshard_after_forward) {
  auto model = std::make_shared<Stack>();
  fsdp::FullyShardOptions options;
  options.reshard_after_forward = reshard_after_forward;
  shard_layers_and_root(*model, mesh, options);
  return model;
}

TEST(FSDPEngine, UnevenShapesMatchUnshardedGradients) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    shard_layers_and_root(*model, mesh);
    // torch.chunk rows: l0.weight [5] -> 2,2,1,0; l1.weight [2] -> 1,1,0,0
    const int64_t l0_rows[] = {2, 2, 1, 0}, l1_rows[] = {1, 1, 0, 0};
    EXPECT_EQ(model->l0->named_parameters()["weight"].size(0), l0_rows[rt.rank()]);
    EXPECT_EQ(model->l1->named_parameters()["weight"].size(0), l1_rows[rt.rank()]);
    EXPECT_EQ(model->l1->named_parameters()["weight"].size(1), 5);

    at::Tensor out = (*model)(local_batch(mesh));
    auto reference = reference_with_grads();
    const int64_t per_rank = 2;
    EXPECT_TRUE(out.allclose((*reference)(global_batch()).narrow(0, rt.rank() * per_rank, per_rank), 1e-6, 1e-6));
    loss_of(out).backward();
    expect_grads_match(*model, *reference, mesh);
  });
}

TEST(FSDPEngine, HybridShardingMatchesUnsharded) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, 2);
    auto model = std::make_shared<Stack>();
    shard_layers_and_root(*model, mesh);
    expect_step_matches_reference(*model, mesh);
  });
}

TEST(FSDPEngine, FrozenParametersAreGatheredButNeverReduced) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    auto reference = std::make_shared<Stack>();
    for (auto* m : {model.get(), reference.get()}) m->l1->named_parameters()["weight"].set_requires_grad(false);
    shard_layers_and_root(*model, mesh);
    at::Tensor frozen = model->l1->named_parameters()["weight"];
    EXPECT_FALSE(frozen.requires_grad());
    loss_of((*model)(local_batch(mesh))).backward();
    loss_of((*reference)(global_batch())).backward();
    EXPECT_FALSE(frozen.grad().defined());
    expect_grads_match(*model, *reference, mesh);
  });
}

TEST(FSDPEngine, IgnoredParametersStayWholeWithAveragedGradients) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    fsdp::FullyShardOptions options;
    options.ignored_params = model->l1->parameters();
    fsdp::fully_shard(*model->l0, mesh, options);
    fsdp::fully_shard(*model, mesh, options);  // takes l2 and scale, leaves l1 alone
    at::Tensor ignored = model->l1->named_parameters()["weight"];
    EXPECT_EQ(fsdp::find_fsdp_param(ignored), nullptr);
    EXPECT_EQ(ignored.sizes(), (std::vector<int64_t>{2, 5}));
    loss_of((*model)(local_batch(mesh))).backward();
    auto reference = reference_with_grads();
    EXPECT_TRUE(ignored.grad().allclose(reference->l1->named_parameters()["weight"].grad(), 1e-5, 1e-6))
        << "ignored parameters' gradients must be averaged over data-parallel ranks";
    at::Tensor sharded = model->l2->named_parameters()["weight"];
    const auto& layout = fsdp::find_fsdp_param(sharded)->layout();
    at::Tensor expected = reference->l2->named_parameters()["weight"].grad().narrow(0, layout.first_row(rt.rank()), layout.rows_on(rt.rank()));
    EXPECT_TRUE(sharded.grad().allclose(expected, 1e-5, 1e-6));
  });
}

// Every fully_shard call carries the same ignored list (as FSDP2Mixin passes it): each ignored
// gradient is still all-reduced exactly once per backward, not once per group.
TEST(FSDPEngine, IgnoredParametersAreReducedOncePerStepWithEveryLayerWrapped) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    fsdp::FullyShardOptions options;
    options.ignored_params = {model->l0->named_parameters()["bias"], model->l1->named_parameters()["bias"],
                              model->named_parameters(false)["scale"]};
    shard_layers_and_root(*model, mesh, options);
    auto reference = reference_with_grads();
    for (int step = 0; step < 2; ++step) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
      const int64_t before = parallel::collective_counts().all_reduce;
      loss_of((*model)(local_batch(mesh))).backward();
      EXPECT_EQ(parallel::collective_counts().all_reduce - before, 3) << "step " << step;
    }
    for (const char* name : {"l0.bias", "l1.bias", "scale"}) {
      EXPECT_TRUE(model->named_parameters()[name].grad().allclose(reference->named_parameters()[name].grad(), 1e-5, 1e-6))
          << name;
    }
  });
}

TEST(FSDPEngine, NoSyncAccumulatesUntilTheSyncingBackward) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    shard_layers_and_root(*model, mesh);
    fsdp::set_requires_gradient_sync(*model, false);
    (loss_of((*model)(local_batch(mesh, 0))) / 2).backward();
    for (auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined()) << "reduced during no-sync";
    fsdp::set_requires_gradient_sync(*model, true);
    (loss_of((*model)(local_batch(mesh, 1))) / 2).backward();
    expect_grads_match(*model, *reference_with_grads(2), mesh);
  });
}

TEST(FSDPEngine, PrefetchAndNoReshardGiveTheSameGradients) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    for (bool reshard : {true, false}) {
      auto model = sharded_stack(mesh, reshard);
      fsdp::set_modules_to_forward_prefetch(*model->l0, {model->l1.get(), model->l2.get()});
      fsdp::set_modules_to_backward_prefetch(*model->l2, {model->l1.get(), model->l0.get()});
      for (int step = 0; step < 2; ++step) {  // a second step re-gathers after the first reshard
        for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
        expect_step_matches_reference(*model, mesh);
      }
    }
  });
}

// An explicit backward prefetch of a group whose backward is done is skipped: that group would stay
// gathered past the optimizer step, and the next forward would compute with the old parameters.
TEST(FSDPEngine, BackwardPrefetchSkipsAGroupAlreadyReduced) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = sharded_stack(mesh, /*reshard_after_forward=*/true);
    fsdp::set_modules_to_backward_prefetch(*model->l0, {model->l2.get()});  // l2's backward came first
    std::vector<std::string> events;
    fsdp::set_engine_trace(&events);
    expect_step_matches_reference(*model, mesh);
    fsdp::set_engine_trace(nullptr);
    const auto l0_backward = std::find(events.rbegin(), events.rend(), "backward Linear");
    ASSERT_NE(l0_backward, events.rend());
    EXPECT_EQ(std::count(events.rbegin(), l0_backward, "all-gather Linear"), 0)
        << "l0's backward gathered l2 again after l2 was reduced";
  });
}

// Note [Overlap]: each group's reduce-scatter is still in flight while the next group's
// backward runs (waited for when that one issues its own), and without explicit lists a group's
// backward starts the all-gather of the group before it. The gradients are unchanged.
TEST(FSDPEngine, ReduceScattersOverlapTheNextBackwardAndPrefetchIsImplicit) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = sharded_stack(mesh, /*reshard_after_forward=*/true);
    std::vector<std::string> events;
    fsdp::set_engine_trace(&events);
    expect_step_matches_reference(*model, mesh);
    fsdp::set_engine_trace(nullptr);
    std::vector<std::string> backward;  // without the all-gathers
    for (const auto& e : events) {
      if (e.rfind("all-gather", 0) != 0) backward.push_back(e);
    }
    EXPECT_EQ(backward, (std::vector<std::string>{
                            "backward Stack", "backward Linear",                                       // l2
                            "reduce-scatter issued Linear", "backward Linear",                         // l1 runs while l2's is in flight
                            "reduce-scatter done Linear", "reduce-scatter issued Linear", "backward Linear",  // l0
                            "reduce-scatter done Linear", "reduce-scatter issued Linear",              // l0's, at the end
                            "reduce-scatter done Linear", "reduce-scatter issued Stack", "reduce-scatter done Stack"}));
    // l2's backward gathers l2, then l1 ahead of l1's backward (implicit prefetch).
    const auto first = std::find(events.begin(), events.end(), "backward Linear");
    const auto issued = std::find(first, events.end(), "reduce-scatter issued Linear");
    EXPECT_EQ(std::count(first, issued, "all-gather Linear"), 2) << "events from l2's backward on";
  });
}

// FSDP2's set_gradient_divide_factor: 1 sums the ranks' gradients instead of averaging them.
TEST(FSDPEngine, GradientDivideFactorScalesTheReducedGradients) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = sharded_stack(mesh, true);
    fsdp::set_gradient_divide_factor(*model, 1.0);
    loss_of((*model)(local_batch(mesh))).backward();
    auto reference = reference_with_grads();
    for (auto& p : reference->parameters()) p.mutable_grad().mul_(mesh.data_parallel_size());
    expect_grads_match(*model, *reference, mesh);
    EXPECT_THROW(fsdp::set_gradient_divide_factor(*model, 0.0), std::invalid_argument);
  });
}

TEST(FSDPEngine, RecomputeGivesTheSameGradients) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    parallel::enable_recompute(*model->l0);
    parallel::enable_recompute(*model->l1);
    shard_layers_and_root(*model, mesh);
    expect_step_matches_reference(*model, mesh);
  });
}

TEST(FSDPEngine, GatheredStorageIsFreedBetweenForwardAndBackward) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    for (bool reshard : {true, false}) {
      auto model = sharded_stack(mesh, reshard);
      auto nbytes = [](parallel::Module& m) {
        size_t total = 0;
        for (auto& p : fsdp::fsdp_state(m)->group()->params()) total += fsdp::storage_nbytes(p->unsharded());
        return total;
      };
      // Observe l0 during its own backward: a hook on its output runs after FSDP's pre-backward.
      size_t l0_in_backward = 0;
      model->l0->add_post_hook([&](parallel::Module&, const parallel::Module::Tensors&, const parallel::Module::Tensors& out) {
        out.front().register_hook([&](const at::Tensor& grad) {
          l0_in_backward = nbytes(*model->l0);
          return grad;
        });
        return out;
      });
      at::Tensor out = (*model)(local_batch(mesh));
      for (auto* layer : {model->l0.get(), model->l1.get(), model->l2.get()}) {
        if (reshard) {
          EXPECT_EQ(nbytes(*layer), 0u) << "gathered storage kept after forward";
        } else {
          EXPECT_GT(nbytes(*layer), 0u) << "reshard_after_forward=false must keep parameters";
        }
      }
      EXPECT_GT(nbytes(*model), 0u) << "the root keeps its parameters after forward";
      loss_of(out).backward();
      EXPECT_GT(l0_in_backward, 0u) << "not gathered again for backward";
      for (parallel::Module* layer : std::initializer_list<parallel::Module*>{model->l0.get(), model->l1.get(), model->l2.get(), model.get()}) {
        EXPECT_EQ(nbytes(*layer), 0u) << "not freed after backward";
      }
      expect_grads_match(*model, *reference_with_grads(), mesh);
    }
  });
}

TEST(FSDPEngine, MixedPrecisionComputesInParamDtype) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Stack>();
    fsdp::FullyShardOptions options;
    options.mixed_precision.param_dtype = torch::kBFloat16;
    options.mixed_precision.reduce_dtype = torch::kFloat;
    options.mixed_precision.output_dtype = torch::kFloat;
    shard_layers_and_root(*model, mesh, options);
    at::ScalarType seen = torch::kFloat;
    model->l1->add_pre_hook([&](parallel::Module& m, const parallel::Module::Tensors& x) {
      seen = dynamic_cast<models::Linear&>(m).weight().scalar_type();
      return x;
    });
    at::Tensor out = (*model)(local_batch(mesh));
    EXPECT_EQ(seen, torch::kBFloat16);
    EXPECT_EQ(out.scalar_type(), torch::kFloat);
    loss_of(out).backward();
    for (auto& p : model->parameters()) {
      EXPECT_EQ(p.scalar_type(), torch::kFloat);
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
    }
    // bf16 compute: close to the fp32 reference, but not bit-equal.
    expect_grads_match(*model, *reference_with_grads(), mesh, 5e-2, 5e-2);
  });
}

}  // namespace
}  // namespace megacpp
