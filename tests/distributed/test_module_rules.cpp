// The rules a model's modules must keep (Note [Module hooks] in parallel/module.h, Note [Reading
// another group's parameter] in parallel/fsdp/group_reads.h), broken on purpose: each is refused
// with the rule, the module and the fix, on one rank as on many.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "models/layers/embedding.h"
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

// The root reads `first`'s weight beside calling it: a read of another module's parameter.
class ReadsAnotherWeight : public parallel::Module {
 public:
  ReadsAnotherWeight() : parallel::Module("ReadsAnotherWeight") {
    first = register_module("first", std::make_shared<models::Linear>(8, 8, false, torch::TensorOptions()));
    second = register_module("second", std::make_shared<models::Linear>(8, 8, false, torch::TensorOptions()));
  }
  std::shared_ptr<models::Linear> first, second;

 protected:
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor h = (*first)(x);
    return (*second)(h) + torch::matmul(h, first->weight().t());
  }
};

// Logits from the embedding's weight (a tied output layer).
class TiedOutput : public parallel::Module {
 public:
  TiedOutput() : parallel::Module("TiedOutput") {
    embed = register_module("embed", std::make_shared<models::Embedding>(16, 8, torch::TensorOptions()));
  }
  std::shared_ptr<models::Embedding> embed;

 protected:
  at::Tensor forward(const at::Tensor& ids) override { return torch::matmul((*embed)(ids), embed->weight().t()); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// `Model` with `child` wrapped as its own group, then the root, on every rank; its first forward's error.
template <class Model>
std::string forward_error_with_alone(parallel::DistributedRuntime& rt, const std::string& child, const at::Tensor& input) {
  auto mesh = parallel::DeviceMesh::build(rt, -1);
  auto model = std::make_shared<Model>();
  for (auto& [path, module] : parallel::named_hookable_modules(*model)) {
    if (path == child) parallel::fsdp::fully_shard(*module, mesh, {});
  }
  parallel::fsdp::fully_shard(*model, mesh, {});
  return error_of([&] { (*model)(input); });
}

std::string group_rule(const std::string& parameter, const std::string& group, const std::string& shard) {
  return "parameter '" + parameter + "' was read while its FSDP group ('" + group + "') was not computing, so as this rank's shard " +
         shard + ": a module may read only the parameters of its own FSDP group or of a group around it";
}

TEST(ModuleRules, ReadingAnotherGroupsParameterIsRefusedNamingItOnOneRankAndOnTwo) {
  for (int ranks : {1, 2}) {
    testing::run_on_ranks(ranks, [ranks](parallel::DistributedRuntime& rt) {
      const std::string error = forward_error_with_alone<ReadsAnotherWeight>(rt, "first", torch::randn({3, 8}));
      const std::string shard = ranks == 1 ? "[8, 8] of [8, 8]" : "[4, 8] of [8, 8]";
      EXPECT_NE(error.find(group_rule("first.weight", "first", shard)), std::string::npos) << ranks << " rank(s): " << error;
    });
  }
}

TEST(ModuleRules, ATiedOutputWithTheEmbeddingWrappedAloneIsRefusedNamingIt) {
  for (int ranks : {1, 2}) {
    testing::run_on_ranks(ranks, [ranks](parallel::DistributedRuntime& rt) {
      const std::string error = forward_error_with_alone<TiedOutput>(rt, "embed", torch::arange(6).view({2, 3}));
      const std::string shard = ranks == 1 ? "[16, 8] of [16, 8]" : "[8, 8] of [16, 8]";
      EXPECT_NE(error.find(group_rule("embed.weight", "embed", shard)), std::string::npos) << ranks << " rank(s): " << error;
      EXPECT_NE(error.find("do not wrap the owner apart from its reader"), std::string::npos) << error;
    });
  }
}

}  // namespace
}  // namespace megacpp
