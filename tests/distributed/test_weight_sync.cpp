// rl::sync_colocated_weights (Note [Weight sync]): a Llama sharded by FSDP2 on 2 ranks loads its
// full weights into each rank's unsharded rollout copy; the copy equals the gathered weights
// bit for bit, before and after a training step, and then generates the trainer's logits; a
// rollout model of another shape is refused naming the parameter, with nothing copied. A LoRA
// trainer's adapters reach the rollout merged into their weights (beside TP 2).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/tensor_parallel.h"
#include "rl/weight_sync.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

void expect_rollout_holds(models::LlamaModel& trainer, models::LlamaModel& rollout, const std::string& when) {
  const auto full = parallel::fsdp::gather_full_parameters(trainer);  // collective
  for (const auto& item : rollout.named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), full.at(item.key()))) << item.key() << " " << when;
  }
}

TEST(WeightSync, RolloutCopyEqualsTheGatheredWeightsAfterEveryStep) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    const auto fp32 = torch::TensorOptions().dtype(torch::kFloat);
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto trainer = std::make_shared<models::LlamaModel>(config, fp32);
    models::ParallelizeSettings sharded;
    sharded.wrap.sub_modules_to_wrap = {"layers.{*}"};
    models::parallelize(*trainer, mesh, sharded);
    trainer->init_weights(0.2, 7);
    models::LlamaModel rollout(config, fp32);  // weights of its own until synced

    const rl::WeightSyncStats stats = rl::sync_colocated_weights(*trainer, rollout);
    int64_t bytes = 0, largest = 0;
    for (const auto& p : rollout.parameters()) {
      bytes += p.numel() * 4;
      largest = std::max<int64_t>(largest, p.numel() * 4);
    }
    EXPECT_EQ(stats.tensors, static_cast<int64_t>(rollout.parameters().size()));
    EXPECT_EQ(stats.bytes, bytes);
    EXPECT_LE(stats.largest_gathered, largest) << "one parameter gathered at a time";
    expect_rollout_holds(*trainer, rollout, "after the first sync");

    torch::optim::AdamW optimizer(trainer->parameters(), torch::optim::AdamWOptions(0.05));
    const at::Tensor ids = torch::randint(50, {2, 9}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCPU));
    (*trainer)(ids).pow(2).mean().backward();
    optimizer.step();
    rl::sync_colocated_weights(*trainer, rollout);
    expect_rollout_holds(*trainer, rollout, "after a training step");
    torch::NoGradGuard no_grad;
    const at::Tensor trained = (*trainer)(ids), copied = rollout(ids);
    EXPECT_LE((trained - copied).abs().max().item<double>(), 1e-5);

    models::LlamaConfig other = config;
    other.ffn_hidden_size = 24;
    models::LlamaModel wrong(other, fp32);
    wrong.init_weights(0.2, 11);  // torch::empty's memory may hold NaN, which equals nothing
    const at::Tensor before = wrong.named_parameters()["embed_tokens.weight"].clone();
    try {
      rl::sync_colocated_weights(*trainer, wrong);
      ADD_FAILURE() << "a rollout model of another shape was not refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("parameter layers.0.mlp.gate_proj.weight is [40, 32] in the trained model and [24, 32]"),
                std::string::npos) << e.what();
    }
    EXPECT_TRUE(torch::equal(before, wrong.named_parameters()["embed_tokens.weight"])) << "nothing copied";
  });
}

// With LoRA (verl's LoRA actor beside a rollout without adapters): each adapted weight reaches the
// rollout with its adapter merged in, W + lora_B lora_A x alpha / rank, and the adapters do not;
// the rollout then gives the trainer's logits. Here beside TP 2, whose adapters are split too.
TEST(WeightSync, LoraAdaptersReachTheRolloutMergedIntoTheirWeights) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    const auto fp32 = torch::TensorOptions().dtype(torch::kFloat);
    auto mesh = parallel::DeviceMesh::build(rt, parallel::ParallelDims::resolve(2, -1, 1, "sharding_size", "ulysses_size", 2));
    auto trainer = std::make_shared<models::LlamaModel>(config, fp32);
    models::ParallelizeSettings settings;
    settings.lora = {4, 8.0, 0.0, {"all-linear"}};
    settings.initialize = [&] { trainer->init_weights(0.2, 7); };
    models::parallelize(*trainer, mesh, settings);
    torch::optim::AdamW optimizer(trainer->parameters(), torch::optim::AdamWOptions(0.05));
    torch::manual_seed(3);  // the same ids on both ranks of the TP group
    const at::Tensor ids = torch::randint(50, {2, 9}, torch::TensorOptions().dtype(torch::kLong));
    (*trainer)(ids).pow(2).mean().backward();  // lora_B leaves zero: the adapters now change the weights
    parallel::all_reduce_partial_gradients(trainer->parameters(), torch::kCPU);
    optimizer.step();
    models::LlamaModel rollout(config, fp32);
    rl::sync_colocated_weights(*trainer, rollout);

    const auto full = parallel::fsdp::gather_full_parameters(*trainer);  // collective
    const std::string q = "layers.1.self_attn.q_proj.";
    const at::Tensor adapter = full.at(q + "lora_B.weight").matmul(full.at(q + "lora_A.weight")) * (8.0 / 4);
    EXPECT_GT(adapter.abs().max().item<double>(), 0.0);
    EXPECT_TRUE(torch::allclose(rollout.named_parameters()[q + "weight"], full.at(q + "weight") + adapter, 1e-6, 1e-7));
    EXPECT_TRUE(torch::equal(rollout.named_parameters()["norm.weight"], full.at("norm.weight")));
    EXPECT_EQ(rollout.named_parameters().find(q + "lora_A.weight"), nullptr);
    torch::NoGradGuard no_grad;
    EXPECT_LE(((*trainer)(ids) - rollout(ids)).abs().max().item<double>(), 1e-5);
  });
}

}  // namespace
}  // namespace megacpp
