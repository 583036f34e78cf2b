// Weight sync to rollout workers on ranks of their own (Note [Weight sync over a process
// group]): the trainer's FSDP2 mesh spans the first ranks, the workers the rest. After the
// handshake and after a training step every worker holds the trainer's gathered weights bit for
// bit (cast to its dtype), the chunks cut parameters anywhere; a worker of another shape is refused
// on every rank naming the worker and the parameter; the sender's memory grows by at most one
// layer and one chunk; a worker killed mid-sync fails every trainer rank with the workers named,
// long before the timeout; a LoRA trainer's adapters reach the workers merged into their weights.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "rl/weight_broadcast.h"
#include "rl/weight_sync.h"
#include "runtime/host_caching_allocator.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

constexpr std::chrono::seconds kSyncTimeout{30};

// The trainer's model sharded over the first `trainer_ranks` ranks, or a worker's unsharded copy.
struct SplitJob {
  parallel::DeviceMesh mesh;
  rl::RolloutGroups groups;
  std::shared_ptr<models::LlamaModel> model;
};

SplitJob split_job(parallel::DistributedRuntime& rt, int trainer_ranks, const models::LlamaConfig& trained,
                   const models::LlamaConfig& rollout, c10::ScalarType rollout_dtype = torch::kFloat) {
  SplitJob job{parallel::DeviceMesh::build(rt, parallel::ParallelDims::resolve(trainer_ranks, -1)), {}, nullptr};
  job.groups = rl::split_rollout_ranks(rt, trainer_ranks, kSyncTimeout);
  if (job.groups.is_trainer()) {
    job.model = std::make_shared<models::LlamaModel>(trained, torch::TensorOptions().dtype(torch::kFloat));
    models::ParallelizeSettings sharded;
    sharded.wrap.sub_modules_to_wrap = {"layers.{*}"};
    models::parallelize(*job.model, job.mesh, sharded);
    job.model->init_weights(0.2, 7);
  } else {
    job.model = std::make_shared<models::LlamaModel>(rollout, torch::TensorOptions().dtype(rollout_dtype));
    job.model->init_weights(0.2, 11);  // not torch::empty's memory: it may hold NaN, which equals nothing
  }
  return job;
}

// Trainer rank 0 broadcasts each gathered parameter over the sync group; each worker compares.
void expect_workers_hold_the_trained_weights(SplitJob& job, const std::string& when) {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> full;
  if (job.groups.is_trainer()) full = parallel::fsdp::gather_full_parameters(*job.model);  // collective over the trainers
  if (!job.groups.sync.contains_me()) return;
  for (const auto& item : job.model->named_parameters()) {
    at::Tensor sent = job.groups.is_trainer() ? full.at(item.key()) : torch::empty(item.value().sizes(), torch::kFloat);
    parallel::broadcast(job.groups.sync, sent, 0).wait();
    if (job.groups.is_worker()) {
      EXPECT_TRUE(torch::equal(item.value(), sent.to(item.value().scalar_type()))) << item.key() << " " << when;
    }
  }
}

TEST(WeightBroadcast, WorkersHoldTheTrainersGatheredWeightsBitForBitAfterEveryStep) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    SplitJob job = split_job(rt, 2, config, config, rt.rank() == 3 ? torch::kBFloat16 : torch::kFloat);
    rl::WeightBroadcastOptions options;
    options.chunk_bytes = 1003;  // 1000: chunks end inside parameters and elements
    int64_t bytes = 0;
    for (const auto& p : job.model->parameters()) bytes += c10::multiply_integers(parallel::fsdp::full_shape(p)) * 4;
    std::unique_ptr<rl::WeightReceiver> receiver;
    std::unique_ptr<rl::WeightSender> sender;
    if (job.groups.is_worker()) {
      receiver = std::make_unique<rl::WeightReceiver>(*job.model, job.groups, options);
    } else {
      sender = std::make_unique<rl::WeightSender>(*job.model, job.groups, options);
    }
    const auto sync = [&] { return receiver ? receiver->receive() : sender->send(); };
    const rl::WeightSyncStats stats = sync();
    EXPECT_EQ(stats.tensors, static_cast<int64_t>(job.model->parameters().size()));
    if (rt.rank() != 1) {
      EXPECT_EQ(stats.bytes, bytes);
      EXPECT_GE(stats.chunks, (bytes + 999) / 1000) << "aligned parameters take a few bytes more";
      EXPECT_LE(stats.chunks, (bytes + 8 * stats.tensors + 999) / 1000);
    }
    expect_workers_hold_the_trained_weights(job, "after the handshake's sync");

    if (job.groups.is_trainer()) {
      torch::optim::AdamW optimizer(job.model->parameters(), torch::optim::AdamWOptions(0.05));
      const at::Tensor ids = torch::randint(50, {2, 9}, torch::TensorOptions().dtype(torch::kLong));
      (*job.model)(ids).pow(2).mean().backward();
      optimizer.step();
    }
    sync();
    expect_workers_hold_the_trained_weights(job, "after a training step");
  });
}

// A trainer with LoRA adapters (FSDP 2) and a worker without: the handshake names the adapted
// weights only, and after a training step the worker holds what a colocated sync gives, each
// adapter merged into its weight.
TEST(WeightBroadcast, WorkersTakeLoraAdaptersMergedIntoTheirWeights) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/false);
    const auto fp32 = torch::TensorOptions().dtype(torch::kFloat);
    auto mesh = parallel::DeviceMesh::build(rt, parallel::ParallelDims::resolve(2, -1));
    const rl::RolloutGroups groups = rl::split_rollout_ranks(rt, 2, kSyncTimeout);
    auto model = std::make_shared<models::LlamaModel>(config, fp32);
    models::LlamaModel merged(config, fp32);  // a trainer's colocated copy
    std::unique_ptr<rl::WeightSender> sender;
    std::unique_ptr<rl::WeightReceiver> receiver;
    if (groups.is_trainer()) {
      models::ParallelizeSettings settings;
      settings.lora = {4, 8.0, 0.0, {"q_proj", "down_proj"}};
      settings.initialize = [&] { model->init_weights(0.2, 7); };
      models::parallelize(*model, mesh, settings);
      sender = std::make_unique<rl::WeightSender>(*model, groups);
      torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(0.05));
      (*model)(torch::randint(50, {2, 9}, torch::TensorOptions().dtype(torch::kLong))).pow(2).mean().backward();
      optimizer.step();
      sender->send();
      rl::sync_colocated_weights(*model, merged);
    } else {
      model->init_weights(0.2, 11);
      receiver = std::make_unique<rl::WeightReceiver>(*model, groups);
      receiver->receive();
    }
    if (!groups.sync.contains_me()) return;
    torch::NoGradGuard no_grad;
    for (const auto& item : merged.named_parameters()) {
      at::Tensor sent = item.value().clone();
      parallel::broadcast(groups.sync, sent, 0).wait();
      if (groups.is_worker()) EXPECT_TRUE(torch::equal(model->named_parameters()[item.key()], sent)) << item.key();
    }
  });
}

TEST(WeightBroadcast, AWorkerOfAnotherModelIsRefusedOnEveryRankBeforeAnyWeightMoves) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    models::LlamaConfig other = config;
    if (rt.rank() == 3) other.ffn_hidden_size = 24;
    SplitJob job = split_job(rt, 2, config, other);
    const at::Tensor before = job.model->named_parameters()["embed_tokens.weight"].clone();
    try {
      if (job.groups.is_worker()) {
        rl::WeightReceiver receiver(*job.model, job.groups);
      } else {
        rl::WeightSender sender(*job.model, job.groups);
      }
      ADD_FAILURE() << "rank " << rt.rank() << ": a worker of another shape was not refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("weight sync: rollout worker rank 3 refused the trained model: parameter "
                                           "layers.0.mlp.gate_proj.weight is [40, 32] in the trained model and [24, 32] in the rollout model"),
                std::string::npos) << e.what();
    }
    EXPECT_TRUE(torch::equal(before, job.model->named_parameters()["embed_tokens.weight"])) << "nothing moved";
  });
}

// Hidden 512, FFN 1536: every projection is 1 MiB or more, so the host caching allocator (which
// counts blocks from 1 MiB) sees the gathers; the model is ~4x one layer.
models::LlamaConfig wide_llama() {
  models::LlamaConfig c = testing::tiny_llama(/*tied=*/false, /*qwen3=*/false);
  c.vocab_size = 1024;
  c.hidden_size = 512;
  c.ffn_hidden_size = 1536;
  c.num_layers = 4;
  c.num_attention_heads = 8;
  c.num_query_groups = 8;
  return c;
}

TEST(WeightBroadcast, TheSendersMemoryGrowsByAtMostOneLayerAndOneChunk) {
  testing::run_on_ranks(3, [](parallel::DistributedRuntime& rt) {
    runtime::install_host_caching_allocator();
    auto& allocator = runtime::HostCachingAllocator::instance();
    SplitJob job = split_job(rt, 2, wide_llama(), wide_llama());
    rl::WeightBroadcastOptions options;
    options.chunk_bytes = int64_t{1} << 20;
    int64_t model_bytes = 0, layer_bytes = 0;
    for (const auto& item : job.model->named_parameters()) {
      const int64_t bytes = c10::multiply_integers(parallel::fsdp::full_shape(item.value())) * 4;
      model_bytes += bytes;
      if (item.key().rfind("layers.0.", 0) == 0) layer_bytes += bytes;
    }
    if (job.groups.is_worker()) {
      rl::WeightReceiver(*job.model, job.groups, options).receive();
      return;
    }
    rl::WeightSender sender(*job.model, job.groups, options);
    allocator.reset_peak_stats();
    const size_t before = allocator.stats().in_use;
    const rl::WeightSyncStats stats = sender.send();
    const auto grown = static_cast<int64_t>(allocator.stats().peak_since_reset - before);
    EXPECT_EQ(stats.bytes, model_bytes);
    EXPECT_LE(grown, layer_bytes + options.chunk_bytes)
        << "rank " << rt.rank() << ": the sync held more than one layer (" << layer_bytes << " bytes) and one chunk at once";
    EXPECT_LT(layer_bytes + options.chunk_bytes, model_bytes / 3) << "the bound tells a whole-model gather apart";
  });
}

TEST(WeightBroadcast, AWorkerKilledMidSyncFailsEveryTrainerRankNamingTheWorkers) {
  testing::run_on_ranks_with_killed(4, {3}, [](parallel::DistributedRuntime& rt) {
    const models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    SplitJob job = split_job(rt, 2, config, config);
    rl::WeightBroadcastOptions options;
    options.chunk_bytes = 1024;
    const auto start = std::chrono::steady_clock::now();
    try {
      if (job.groups.is_worker()) {
        rl::WeightReceiver receiver(*job.model, job.groups, options);
        receiver.receive([&](int64_t chunk, int64_t) {
          if (rt.rank() == 3 && chunk == 2) ::raise(SIGKILL);
        });
      } else {
        rl::WeightSender(*job.model, job.groups, options).send();
      }
      ADD_FAILURE() << "rank " << rt.rank() << ": the sync went through without worker 3";
    } catch (const std::runtime_error& e) {
      const std::string expected = job.groups.is_trainer() ? "weight sync to the rollout workers (rank(s) 2, 3) failed "
                                                           : "weight sync from trainer rank 0 to rollout worker rank 2 failed";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, kSyncTimeout.count()) << "rank " << rt.rank() << " waited out the sync group's timeout";
  });
}

}  // namespace
}  // namespace megacpp
