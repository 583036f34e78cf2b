// rl::sync_colocated_weights (Note [Weight sync]): a Llama sharded by FSDP2 on 2 ranks loads its
// full weights into each rank's unsharded rollout copy; the copy equals the gathered weights
// bit for bit, before and after a training step, and then generates the trainer's logits; a
// rollout model of another shape is refused naming the parameter, with nothing copied.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
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

}  // namespace
}  // namespace megacpp
