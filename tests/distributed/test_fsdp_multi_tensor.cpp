// Modules with several tensors in and out under FSDP2 and recompute: an input that needs no
// gradient, an optional input left out, an integer output, two differentiable outputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/layers/linear.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/recompute.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

namespace fsdp = parallel::fsdp;
using Tensors = parallel::Module::Tensors;

// (h [b, 4] needs grad, mask [b, 4] needs none, offset [b, 5] optional) ->
// (tanh(proj(h * mask)) (+ offset) [b, 5], gate(h) summed [b], count of mask > 0 [b] int64).
class TwoInTwoOut : public parallel::Module {
 public:
  explicit TwoInTwoOut(const at::TensorOptions& options) : parallel::Module("TwoInTwoOut") {
    proj = register_module("proj", std::make_shared<models::Linear>(4, 5, true, options));
    gate = register_module("gate", std::make_shared<models::Linear>(4, 3, false, options));
  }
  std::shared_ptr<models::Linear> proj, gate;

 protected:
  Tensors forward_tensors(const Tensors& in) override {
    const at::Tensor &h = in.at(0), &mask = in.at(1), &offset = in.at(2);
    EXPECT_FALSE(mask.requires_grad()) << "the mask needs no gradient";
    at::Tensor y = torch::tanh((*proj)(h * mask));
    if (offset.defined()) y = y + offset;
    return {y, (*gate)(h).sum(-1), (mask > 0).sum(-1)};
  }
};

// x [b, 4] -> h = tanh(input(x)) -> TwoInTwoOut(h, mask of x) -> head(y) + aux [b, 2].
class Outer : public parallel::Module {
 public:
  Outer() : parallel::Module("Outer") {
    auto options = torch::TensorOptions().dtype(torch::kFloat);
    input = register_module("input", std::make_shared<models::Linear>(4, 4, true, options));
    inner = register_module("inner", std::make_shared<TwoInTwoOut>(options));
    head = register_module("head", std::make_shared<models::Linear>(5, 2, true, options));
    torch::NoGradGuard no_grad;
    torch::manual_seed(11);
    for (auto& p : parameters()) p.copy_(torch::randn(p.sizes()));
  }
  std::shared_ptr<models::Linear> input, head;
  std::shared_ptr<TwoInTwoOut> inner;
  at::ScalarType count_dtype = at::kFloat;

 protected:
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor mask = (x > -0.5).to(x.scalar_type());
    Tensors out = (*inner)(Tensors{torch::tanh((*input)(x)), mask, at::Tensor()});
    count_dtype = out.at(2).scalar_type();
    return (*head)(out.at(0)) + out.at(1).unsqueeze(-1);
  }
};

at::Tensor seeded_batch() {
  torch::manual_seed(5);
  return torch::randn({8, 4});
}

TEST(FSDPMultiTensor, WrappedAndRecomputedModuleGivesTheUnshardedGradients) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    Outer reference;
    reference(seeded_batch()).pow(2).mean().backward();

    for (bool recompute : {false, true}) {
      auto model = std::make_shared<Outer>();
      if (recompute) parallel::enable_recompute(*model->inner);
      fsdp::fully_shard(*model->inner, mesh, {});
      fsdp::fully_shard(*model, mesh, {});
      at::Tensor local = seeded_batch().narrow(0, rt.rank() * 4, 4);
      // Each rank's loss is the mean of its half: the average over ranks is the global mean.
      model->operator()(local).pow(2).mean().backward();
      EXPECT_EQ(model->count_dtype, at::kLong) << "integer outputs pass through untouched";
      auto expected = reference.named_parameters();
      for (auto& item : model->named_parameters()) {
        const auto& layout = fsdp::find_fsdp_param(item.value())->layout();
        at::Tensor rows = expected[item.key()].grad().narrow(0, layout.first_row(rt.rank()), layout.rows_on(rt.rank()));
        ASSERT_TRUE(item.value().grad().defined()) << item.key();
        EXPECT_TRUE(item.value().grad().allclose(rows, 1e-5, 1e-6))
            << (recompute ? "recompute: " : "") << item.key() << "\n" << item.value().grad() << "\n" << rows;
      }
    }
  });
}

TEST(FSDPMultiTensor, CastForwardInputsCastsEveryFloatingInputOnly) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<Outer>();
    fsdp::FullyShardOptions options;
    options.mixed_precision.param_dtype = torch::kBFloat16;
    options.mixed_precision.reduce_dtype = torch::kFloat;
    fsdp::fully_shard(*model->inner, mesh, options);
    fsdp::fully_shard(*model, mesh, options);
    Tensors seen;  // what forward sees: this hook runs after FSDP's
    model->inner->add_pre_hook([&](parallel::Module&, const Tensors& in) {
      seen = in;
      return in;
    });
    (*model)(seeded_batch()).to(torch::kFloat).pow(2).mean().backward();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].scalar_type(), torch::kBFloat16);
    EXPECT_EQ(seen[1].scalar_type(), torch::kBFloat16);
    EXPECT_FALSE(seen[2].defined()) << "an optional input left out stays undefined";
    for (auto& p : model->parameters()) EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  });
}

}  // namespace
}  // namespace megacpp
