// parallelize (Note [Parallelize]): the passes in their documented order, initialization before
// sharding for full weights and after it for a meta-device model, and a family changing the list.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "models/tensor_parallel.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

using Strings = std::vector<std::string>;

const parallel::DeviceMesh& single_mesh() {  // outlives every model: fully_shard keeps a pointer
  static const parallel::DeviceMesh mesh = parallel::DeviceMesh::single();
  return mesh;
}

Strings names(const std::vector<models::ParallelizePass>& passes) {
  Strings out;
  for (const auto& pass : passes) out.push_back(pass.name);
  return out;
}

// A family that checks the plan before fully_shard and never prefetches: what a family's
// parallelize_passes does (LLaVA inserts a check the same way).
class CheckedLlama : public models::LlamaModel {
 public:
  using LlamaModel::LlamaModel;
  mutable Strings seen_groups;

  std::vector<models::ParallelizePass> parallelize_passes(std::vector<models::ParallelizePass> passes) const override {
    models::insert_pass_before(passes, "fully_shard", {"record_groups", [this](models::Parallelization& p) {
      EXPECT_EQ(parallel::fsdp::fsdp_state(p.model), nullptr) << "runs before fully_shard";
      seen_groups = p.plan.wrap_paths;
      return true;
    }});
    passes.erase(std::remove_if(passes.begin(), passes.end(), [](const auto& pass) { return pass.name == "prefetch"; }),
                 passes.end());
    return passes;
  }
};

TEST(Parallelize, PassesRunInTheDocumentedOrder) {
  EXPECT_EQ(names(models::default_passes()),
            (Strings{"lora", "freeze", "ulysses", "tensor_parallel", "tiled_mlp", "initialize_full", "sharding_plan", "recompute",
                     "expert_patch", "fully_shard", "prefetch", "initialize_shards"}));
  auto passes = models::default_passes();
  EXPECT_THROW(models::insert_pass_before(passes, "no_such_pass", {"x", [](models::Parallelization&) { return false; }}),
               std::logic_error);
}

// Full weights are initialized before sharding (each rank holds them all); a meta-device
// model's once its shards exist. LoRA's adapters exist by then either way.
TEST(Parallelize, InitializesFullWeightsBeforeShardingAndMetaWeightsAfter) {
  for (const bool meta : {false, true}) {
    SCOPED_TRACE(meta ? "meta device" : "full weights");
    const auto options = torch::TensorOptions().device(meta ? c10::Device(c10::kMeta) : c10::Device(c10::kCPU));
    auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(true, false), options);
    models::ParallelizeSettings settings;
    settings.wrap.sub_modules_to_wrap = {"layers.{*}"};
    settings.lora.rank = 2;
    settings.lora.target_modules = {"q_proj"};
    int calls = 0;
    settings.initialize = [&] {
      ++calls;
      EXPECT_EQ(parallel::fsdp::fsdp_state(*model) != nullptr, meta) << "sharded when initialized";
      EXPECT_EQ(model->named_parameters().contains("layers.0.self_attn.q_proj.lora_A.weight"), true);
      model->init_weights(0.02, 1234);
    };
    models::parallelize(*model, single_mesh(), settings);
    EXPECT_EQ(calls, 1);
    for (const auto& p : model->parameters()) EXPECT_FALSE(p.is_meta());
  }
}

TEST(Parallelize, AFamilyInsertsAndDropsPasses) {
  auto model = std::make_shared<CheckedLlama>(testing::tiny_llama(false, false), torch::TensorOptions());
  models::ParallelizeSettings settings;
  settings.wrap.sub_modules_to_wrap = {"layers.{*}", "lm_head"};
  settings.sharding.num_to_forward_prefetch = 1;  // dropped by the family: no prefetch list is set
  const models::ShardingPlan plan = models::parallelize(*model, single_mesh(), settings);
  EXPECT_EQ(model->seen_groups, (Strings{"layers.0", "layers.1", "lm_head"}));
  EXPECT_EQ(plan.wrap_paths, model->seen_groups);
}

// Without FSDP2 only the model passes run: nothing is sharded, and a meta-device model is
// refused (its weights have no memory to initialize).
TEST(Parallelize, WithoutShardingOnlyTheModelPassesRun) {
  auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(true, false), torch::TensorOptions());
  models::ParallelizeSettings settings;
  settings.shard = false;
  settings.freeze_module_prefix = {"layers.0"};
  settings.wrap.sub_modules_to_wrap = {"layers.{*}"};
  EXPECT_TRUE(models::parallelize(*model, single_mesh(), settings).wrap_paths.empty());
  EXPECT_EQ(parallel::fsdp::fsdp_state(*model), nullptr);
  EXPECT_FALSE(model->named_parameters()["layers.0.mlp.gate_proj.weight"].requires_grad());

  auto on_meta = std::make_shared<models::LlamaModel>(testing::tiny_llama(true, false), torch::TensorOptions().device(c10::kMeta));
  settings.freeze_module_prefix.clear();
  settings.initialize = [] {};
  try {
    models::parallelize(*on_meta, single_mesh(), settings);
    ADD_FAILURE() << "a meta-device model was left unsharded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--init-model-with-meta-device needs --use-torch-fsdp2"), std::string::npos) << e.what();
  }
}

// A family that does not override FSDP2Mixin::tensor_parallel_refusal (an out-of-tree one, say) is
// refused by name, the hook named, before any parameter is split.
class UnsplitLlama : public models::LlamaModel {
 public:
  using LlamaModel::LlamaModel;
  std::string tensor_parallel_refusal() const override { return models::FSDP2Mixin::tensor_parallel_refusal(); }
};

TEST(Parallelize, AFamilyThatDoesNotOptIntoTensorParallelismIsRefusedByName) {
  auto model = std::make_shared<UnsplitLlama>(testing::tiny_llama(false, false), torch::TensorOptions());
  const auto before = model->named_parameters()["layers.0.self_attn.q_proj.weight"].sizes().vec();
  try {
    models::apply_tensor_parallel(*model, parallel::Group::single(0), "--tensor-model-parallel-size 2");
    ADD_FAILURE() << "a family that does not opt in was split";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--tensor-model-parallel-size 2: this model cannot split its layers: it does not say "
                                         "that its layers split over tensor-parallel ranks (FSDP2Mixin::tensor_parallel_refusal)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(model->named_parameters()["layers.0.self_attn.q_proj.weight"].sizes().vec(), before);
}

}  // namespace
}  // namespace megacpp
