// The rules a model's modules must keep (Note [Module hooks] in parallel/module.h), broken on
// purpose: each is refused with the rule, the module and the fix, on one rank as on many.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "models/layers/linear.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

// y = proj(x) * scale, with `scale` registered as torch does it, not in a slot.
class ScaledProjection : public parallel::Module {
 public:
  ScaledProjection() : parallel::Module("ScaledProjection") {
    proj = register_module("proj", std::make_shared<models::Linear>(4, 4, false, torch::TensorOptions()));
    scale = register_parameter("scale", torch::ones({4}));
  }
  std::shared_ptr<models::Linear> proj;
  at::Tensor scale;

 protected:
  at::Tensor forward(const at::Tensor& x) override { return (*proj)(x) * scale; }
};

// One child module, `Child`, under "block".
template <class Child>
class Holder : public parallel::Module {
 public:
  Holder() : parallel::Module("Holder") { block = register_module("block", std::make_shared<Child>()); }
  std::shared_ptr<Child> block;

 protected:
  at::Tensor forward(const at::Tensor& x) override { return (*block)(x); }
};

// torch::nn::Linear itself, not megacpp's: its parameters sit in no slot.
class TorchLinear : public torch::nn::LinearImpl {
 public:
  TorchLinear() : torch::nn::LinearImpl(4, 4) {}
};

class WithTorchLinear : public parallel::Module {
 public:
  WithTorchLinear() : parallel::Module("WithTorchLinear") { block = register_module("block", std::make_shared<TorchLinear>()); }
  std::shared_ptr<TorchLinear> block;
};

std::string refusal_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

const char* const kSlotRule =
    "module 'block' (ScaledProjection) holds parameter 'scale' outside a slot (torch's register_parameter): a megacpp "
    "parallel::Module keeps each parameter in a slot, which FSDP points at the gathered tensor during forward; register it "
    "with register_slot(\"scale\", member, tensor) and read the member in forward";

TEST(ModuleRules, AParameterOutsideASlotIsRefusedNamingTheModuleOnOneRankAndOnTwo) {
  auto model = std::make_shared<Holder<ScaledProjection>>();
  EXPECT_EQ(refusal_of([&] { parallel::require_parameters_in_slots(*model); }), kSlotRule);
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto sharded = std::make_shared<Holder<ScaledProjection>>();
    EXPECT_EQ(refusal_of([&] { parallel::fsdp::fully_shard(*sharded, mesh, {}); }), kSlotRule);
  });
}

TEST(ModuleRules, ATorchModuleUnderFsdpIsRefusedNamingItAndWhatToDo) {
  auto model = std::make_shared<WithTorchLinear>();
  EXPECT_EQ(refusal_of([&] { parallel::require_parameters_in_slots(*model); }), "(no error)")
      << "a plain torch::nn::Module is not checked for slots: unsharded, it may hold its parameters as torch does";
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto sharded = std::make_shared<WithTorchLinear>();
    EXPECT_EQ(refusal_of([&] { parallel::fsdp::fully_shard(*sharded, mesh, {}); }),
              "fully_shard: parameter 'block.weight' belongs to module 'block', a torch::nn::Module that is not a megacpp "
              "parallel::Module, so FSDP cannot shard it: build that module on parallel::Module (models/layers has Linear, "
              "Embedding and the norms) or leave it unsharded (ignored_modules)");
  });
}

}  // namespace
}  // namespace megacpp
