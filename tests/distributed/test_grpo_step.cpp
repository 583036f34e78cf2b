// rl::grpo_step (Note [GRPO step]) end to end on 2 ranks with FSDP: a tiny Llama, its rollout
// copy and a frozen reference learn, from a verifiable reward alone (the share of response
// tokens that are token 7), to answer with token 7: the mean reward rises from chance (1/50)
// to above 0.5 within 30 steps, the reported KL to the reference grows from 0, and the rollout
// copy keeps the actor's weights. A reward function that throws fails the step naming the prompt;
// a reference of another shape is refused naming the parameter. With the rollout on workers of
// its own (Note [Remote rollout]) greedy responses are those of the actor's weights, the actor
// learns as well, and a prompt beyond the context fails every rank naming worker and prompt. A
// tensor-parallel actor (with and without sequence parallelism) and a Ulysses one take one rank's
// steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "rl/grpo_step.h"
#include "rl/remote_rollout.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

std::shared_ptr<models::LlamaModel> sharded_llama(const parallel::DeviceMesh& mesh) {
  auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
  models::ParallelizeSettings sharded;
  sharded.wrap.sub_modules_to_wrap = {"layers.{*}"};
  models::parallelize(*model, mesh, sharded);
  model->init_weights(0.2, 7);
  return model;
}

double share_of_sevens(const std::vector<int64_t>&, const std::vector<int64_t>& response) {
  return static_cast<double>(std::count(response.begin(), response.end(), 7)) / static_cast<double>(response.size());
}

rl::GrpoSettings settings() {
  rl::GrpoSettings s;
  s.responses_per_prompt = 4;
  s.sampling.max_new_tokens = 4;
  s.update.micro_batch_size = 8;
  s.update.kl_coef = 0.001;
  return s;
}

std::vector<std::vector<int64_t>> prompts_of(int64_t step, int rank) {
  torch::manual_seed(1000 * step + rank);
  std::vector<std::vector<int64_t>> prompts;
  for (int p = 0; p < 4; ++p) {
    const at::Tensor ids = torch::randint(50, {2 + p % 3}, torch::kLong);
    prompts.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  return prompts;
}

// 30 steps from the actor's initial weights; the mean reward of each and the last KL.
std::vector<double> learn(rl::RolloutEngine& rollout, models::LlamaModel& actor, models::LlamaModel& reference,
                          const parallel::DeviceMesh& mesh, const parallel::Group& world, double& last_kl) {
  torch::optim::Adam optimizer(actor.parameters(), torch::optim::AdamOptions(0.02));
  rl::GrpoSettings s = settings();
  std::vector<double> rewards;
  for (int64_t step = 0; step < 30; ++step) {
    s.sampling.seed = static_cast<uint64_t>(100 * step + world.rank);
    const rl::GrpoStepStats stats =
        rl::grpo_step(actor, optimizer, rollout, &reference, prompts_of(step, world.rank), share_of_sevens, s, mesh, world);
    rewards.push_back(stats.reward);
    last_kl = stats.update.kl;
    EXPECT_EQ(stats.response_length, 4.0);
  }
  const double late = (rewards[25] + rewards[26] + rewards[27] + rewards[28] + rewards[29]) / 5;
  if (world.rank == 0) std::cout << "reward: first step " << rewards[0] << ", last five " << late << ", KL " << last_kl << std::endl;
  EXPECT_LT(rewards[0], 0.2);
  EXPECT_GT(late, 0.5);
  EXPECT_GT(last_kl, 0.0);
  return rewards;
}

TEST(GrpoStep, LearnsAVerifiableRewardOnTwoRanks) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto actor = sharded_llama(mesh), reference = sharded_llama(mesh);
    models::LlamaModel rollout_model(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
    rl::ColocatedRollout rollout(rollout_model);
    rollout.sync(*actor);
    double last_kl = 0;
    learn(rollout, *actor, *reference, mesh, rt.world(), last_kl);
    torch::optim::Adam optimizer(actor->parameters(), torch::optim::AdamOptions(0.02));
    const rl::GrpoSettings s = settings();
    const auto gathered = parallel::fsdp::gather_full_parameters(*actor);
    for (const auto& item : rollout_model.named_parameters()) EXPECT_TRUE(torch::equal(item.value(), gathered.at(item.key()))) << item.key();

    const rl::RewardFunction failing = [](const std::vector<int64_t>&, const std::vector<int64_t>&) -> double {
      throw std::runtime_error("no answer to parse");
    };
    try {
      rl::grpo_step(*actor, optimizer, rollout, nullptr, prompts_of(0, rt.rank()), failing, s, mesh, rt.world());
      ADD_FAILURE() << "a failing reward function was not reported";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("the reward function failed on prompt 0 of this rank: no answer to parse"), std::string::npos)
          << e.what();
    }
    models::LlamaConfig wider = testing::tiny_llama(false, false);
    wider.ffn_hidden_size = 48;
    models::LlamaModel other(wider, torch::TensorOptions().dtype(torch::kFloat));
    try {
      rl::grpo_step(*actor, optimizer, rollout, &other, prompts_of(0, rt.rank()), share_of_sevens, s, mesh, rt.world());
      ADD_FAILURE() << "a reference of another model was not refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("the reference is not the actor's model: parameter layers.0.mlp.gate_proj.weight is [40, 32] "
                                           "in the actor model and [48, 32] in the reference model"), std::string::npos) << e.what();
    }
  });
}

TEST(GrpoStep, LearnsWithRolloutWorkersOnRanksOfTheirOwn) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, parallel::ParallelDims::resolve(2, -1));
    const rl::RolloutGroups groups = rl::split_rollout_ranks(rt, 2, std::chrono::seconds(30));
    const std::string too_long = "rollout worker rank 2 failed: prompt 0 of trainer rank 0 has 9 tokens: the context of 8 leaves no room";
    if (groups.is_worker()) {
      models::LlamaModel model(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
      rl::RolloutWorker worker(model, groups);
      try {
        worker.serve();
        ADD_FAILURE() << "the worker's loop ended without the trainer's too long prompt";
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(too_long), std::string::npos) << e.what();
      }
      return;
    }
    auto actor = sharded_llama(mesh), reference = sharded_llama(mesh);
    rl::RemoteRollout rollout(*actor, groups);
    inference::Sampling greedy;
    greedy.temperature = 0;
    greedy.max_new_tokens = 5;
    models::LlamaModel local(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
    rl::sync_colocated_weights(*actor, local);
    const auto prompts = prompts_of(0, rt.rank());
    const auto remote = rollout.generate(prompts, 2, greedy), here = inference::generate(local, rl::repeat_each(prompts, 2), greedy);
    ASSERT_EQ(remote.size(), here.size());
    for (size_t i = 0; i < here.size(); ++i) EXPECT_EQ(remote[i].tokens, here[i].tokens) << "response " << i;
    rollout.sync(*actor);

    double last_kl = 0;
    learn(rollout, *actor, *reference, mesh, groups.trainers, last_kl);
    inference::Sampling bounded = greedy;
    bounded.max_length = 8;
    try {
      rollout.generate({std::vector<int64_t>(rt.rank() == 0 ? 9 : 3, 1)}, 1, bounded);
      ADD_FAILURE() << "a prompt beyond the context was not refused";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(too_long), std::string::npos) << e.what();
    }
  });
}

// Each step's figures and the final parameters of `steps` GRPO steps of a Qwen3-style tiny Llama
// (q/k norms: gradients TP leaves partial) from the same weights on `mesh`: the prompts, the
// sampling seed and the reward are the data-parallel rank's.
struct GrpoTrace {
  std::vector<double> rewards, kls, policy_losses, entropies;
  std::map<std::string, at::Tensor> params;
};

GrpoTrace grpo_on(const parallel::DeviceMesh& mesh, const parallel::Group& world, bool sequence_parallel, int steps,
                  int64_t mini_batch_size = 0, rl::LossAggregation aggregation = rl::LossAggregation::kTokenMean) {
  auto llama = [&] {
    auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(false, true), torch::TensorOptions().dtype(torch::kFloat));
    model->init_weights(0.2, 7);  // whole, before any split: one rank's weights
    models::ParallelizeSettings settings;
    settings.wrap.sub_modules_to_wrap = {"layers.{*}"};
    settings.shard = mesh.world_size() > 1;
    settings.sequence_parallel = sequence_parallel;
    models::parallelize(*model, mesh, settings);
    return model;
  };
  auto actor = llama(), reference = llama();
  models::LlamaModel rollout_model(testing::tiny_llama(false, true), torch::TensorOptions().dtype(torch::kFloat));
  rl::ColocatedRollout colocated(rollout_model);
  rl::SharedByModelParallelGroup shared(colocated, rl::model_parallel_group(mesh), torch::kCPU);
  rl::RolloutEngine& rollout = rl::model_parallel_group(mesh).size() > 1 ? static_cast<rl::RolloutEngine&>(shared) : colocated;
  rollout.sync(*actor);
  torch::optim::SGD optimizer(actor->parameters(), torch::optim::SGDOptions(0.5));  // Adam would amplify round-off
  rl::GrpoSettings s = settings();
  s.position_multiple = (sequence_parallel ? mesh.tp().size() : 1) * mesh.cp().size();
  s.update.cp = mesh.cp();
  s.mini_batch_size = mini_batch_size;
  s.update.policy.aggregation = aggregation;
  GrpoTrace trace;
  for (int step = 0; step < steps; ++step) {
    const int dp_rank = mesh.data_parallel_rank();
    s.sampling.seed = static_cast<uint64_t>(100 * step + dp_rank);
    const rl::GrpoStepStats stats = rl::grpo_step(*actor, optimizer, rollout, reference.get(), prompts_of(step, dp_rank), share_of_sevens, s, mesh, world);
    trace.rewards.push_back(stats.reward);
    trace.kls.push_back(stats.update.kl);
    trace.policy_losses.push_back(stats.update.policy_loss);
    trace.entropies.push_back(stats.update.entropy);
  }
  trace.params = parallel::fsdp::gather_full_parameters(*actor);
  return trace;
}

void expect_close(const std::vector<double>& expected, const std::vector<double>& got, const std::string& what) {
  ASSERT_EQ(expected.size(), got.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i]) + 1e-7) << what << " at step " << i + 1;
}

// With sequence parallelism the actor takes two optimizer steps per GRPO step (mini-batches of 8
// of the 16 responses). A Ulysses pair (each rank its half of every sequence's positions, the
// loss's shares adding up) takes one rank's steps too, under each loss aggregation.
TEST(GrpoStep, ATensorParallelOrUlyssesActorTakesOneRanksSteps) {
  struct Layout {
    int tp, cp;
    bool sequence_parallel;
    int64_t mini_batch;
    rl::LossAggregation aggregation;
    std::string what;
  };
  const std::vector<Layout> layouts = {
      {2, 1, false, 0, rl::LossAggregation::kTokenMean, "TP 2"},
      {2, 1, true, 8, rl::LossAggregation::kTokenMean, "TP 2 + SP, 2 mini-batches"},
      {1, 2, false, 8, rl::LossAggregation::kTokenMean, "Ulysses 2, 2 mini-batches"},
      {1, 2, false, 0, rl::LossAggregation::kSeqMeanTokenMean, "Ulysses 2, seq-mean-token-mean"},
  };
  for (const Layout& l : layouts) {
    testing::run_on_ranks(2, [&](parallel::DistributedRuntime& rt) {
      const GrpoTrace one = grpo_on(parallel::DeviceMesh::single(), parallel::Group::single(0), false, 6, l.mini_batch, l.aggregation);
      const auto mesh = parallel::DeviceMesh::build(rt, parallel::ParallelDims::resolve(2, -1, l.cp, "sharding_size", "ulysses_size", l.tp));
      const GrpoTrace split = grpo_on(mesh, rt.world(), l.sequence_parallel, 6, l.mini_batch, l.aggregation);
      const std::string& what = l.what;
      EXPECT_GT(*std::max_element(one.rewards.begin(), one.rewards.end()), 0.0) << "some responses rewarded: advantages not all 0";
      expect_close(one.rewards, split.rewards, what + " reward");
      expect_close(one.kls, split.kls, what + " KL");
      expect_close(one.policy_losses, split.policy_losses, what + " policy loss");
      expect_close(one.entropies, split.entropies, what + " entropy");
      for (const auto& [name, expected] : one.params) {
        EXPECT_TRUE(torch::allclose(split.params.at(name), expected, 1e-5, 1e-6)) << what << ": " << name << " differs by "
                                                                                  << (split.params.at(name) - expected).abs().max().item<double>();
      }
    });
  }
}

// verl's mini-batches and epochs: the old log-probs are the sampling policy's, taken once, so the
// first optimizer step of a GRPO step is on-policy (no ratio clipped) and the later ones are not.
// At a high learning rate one step per batch never clips; two mini-batches, or two epochs, do.
TEST(GrpoStep, MiniBatchesAndEpochsStepOffPolicyAfterTheFirst) {
  const parallel::DeviceMesh mesh = parallel::DeviceMesh::single();
  auto clip_fractions = [&](int64_t mini_batch_size, int64_t epochs) {
    auto actor = std::make_shared<models::LlamaModel>(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
    actor->init_weights(0.2, 7);
    models::LlamaModel rollout_model(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
    rl::ColocatedRollout rollout(rollout_model);
    rollout.sync(*actor);
    torch::optim::Adam optimizer(actor->parameters(), torch::optim::AdamOptions(0.05));
    rl::GrpoSettings s = settings();
    s.mini_batch_size = mini_batch_size;
    s.epochs = epochs;
    double clipped = 0;
    for (int step = 0; step < 4; ++step) {
      s.sampling.seed = static_cast<uint64_t>(step);
      clipped += rl::grpo_step(*actor, optimizer, rollout, nullptr, prompts_of(step, 0), share_of_sevens, s, mesh, parallel::Group::single(0))
                     .update.clip_fraction;
    }
    return clipped;
  };
  EXPECT_EQ(clip_fractions(0, 1), 0.0) << "one on-policy step per batch";
  EXPECT_EQ(clip_fractions(16, 1), 0.0) << "a mini-batch of the whole batch";
  EXPECT_GT(clip_fractions(8, 1), 0.0) << "two mini-batches: the second off-policy";
  EXPECT_GT(clip_fractions(0, 2), 0.0) << "two epochs: the second off-policy";
  try {
    clip_fractions(6, 1);
    ADD_FAILURE() << "a mini-batch that does not divide the batch was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("16 responses on this rank do not split into mini-batches of 6"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megacpp
