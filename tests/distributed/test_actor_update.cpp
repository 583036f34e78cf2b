// rl::actor_backward: one GRPO update of a Llama on a fixed rollout batch (8 responses of
// different lengths after prompts of different lengths, advantages of 4 groups, old log-probs
// off the current policy so that clipping acts, a reference for the KL term) leaves the same
// weights on 1 rank and with FSDP on 2 and 4 ranks and HSDP 2x2, each rank updating on its share
// of the responses (fp32, within 1e-5 relative); on 1 rank its loss is the objective computed
// directly from the model's logits (token_log_probs, clipped_policy_loss, kl_penalty).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "inference/token_log_probs.h"
#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "rl/actor_update.h"
#include "rl/reward_shaping.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

constexpr int64_t kResponses = 8, kTokens = 12;

std::shared_ptr<models::LlamaModel> llama() {
  return std::make_shared<models::LlamaModel>(testing::tiny_llama(/*tied=*/false, /*qwen3=*/false),
                                              torch::TensorOptions().dtype(torch::kFloat));
}

// The same batch on every rank: seeded, scored by `policy` (the unsharded model before the update).
rl::RolloutBatch fixed_batch(models::LlamaModel& policy) {
  torch::manual_seed(21);
  rl::RolloutBatch b;
  b.ids = torch::randint(50, {kResponses, kTokens}, torch::kLong);
  b.response_mask = torch::zeros({kResponses, kTokens - 1});
  for (int64_t r = 0; r < kResponses; ++r) {
    const int64_t prompt = 2 + r % 3, length = kTokens - r % 4;  // position t scores token t + 1
    b.response_mask[r].narrow(0, prompt - 1, length - prompt).fill_(1);
  }
  b.advantages = rl::group_advantages(torch::tensor({1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0}), {0, 0, 1, 1, 2, 2, 3, 3});
  torch::NoGradGuard no_grad;
  const at::Tensor current = inference::token_log_probs(policy(b.ids), b.ids, 0.8).log_probs;
  b.old_log_probs = current + 0.3 * torch::randn(current.sizes());  // ratios of about e^{+-0.3}: some clipped
  b.ref_log_probs = current + 0.1 * torch::randn(current.sizes());
  return b;
}

rl::ActorUpdate update_with(int64_t micro_batch_size) {
  rl::ActorUpdate u;
  u.temperature = 0.8;
  u.kl_coef = 0.05;
  u.micro_batch_size = micro_batch_size;
  u.policy.clip_high = 0.28;  // DAPO's clip-higher
  return u;
}

// SGD, not Adam: Adam's first step hardly sees how the gradients are scaled, SGD's does.
void step(models::LlamaModel& model, const rl::RolloutBatch& batch, const rl::ActorUpdate& update) {
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(1.0));
  rl::actor_backward(model, batch, update);
  optimizer.step();
}

rl::RolloutBatch rows_of(const rl::RolloutBatch& b, int64_t first, int64_t count) {
  return {b.ids.narrow(0, first, count), b.response_mask.narrow(0, first, count), b.advantages.narrow(0, first, count),
          b.old_log_probs.narrow(0, first, count), b.ref_log_probs.narrow(0, first, count)};
}

// FSDP (fsdp_size -1) or HSDP on `world` ranks against one unsharded model updated on the whole
// batch with the same micro-batches.
void expect_same_update(int world, int fsdp_size, int64_t micro_batch_size) {
  testing::run_on_ranks(world, [=](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, fsdp_size);
    auto whole = llama(), actor = llama();
    whole->init_weights(0.2, 7);
    models::ParallelizeSettings sharded;
    sharded.wrap.sub_modules_to_wrap = {"layers.{*}"};
    models::parallelize(*actor, mesh, sharded);
    actor->init_weights(0.2, 7);
    const rl::RolloutBatch batch = fixed_batch(*whole);
    step(*whole, batch, update_with(micro_batch_size));
    const int64_t per_rank = kResponses / mesh.data_parallel_size();
    rl::ActorUpdate sharded_update = update_with(micro_batch_size);
    sharded_update.fsdp = true;
    step(*actor, rows_of(batch, mesh.data_parallel_rank() * per_rank, per_rank), sharded_update);
    const auto gathered = parallel::fsdp::gather_full_parameters(*actor);
    for (const auto& item : whole->named_parameters()) {
      const at::Tensor& expected = item.value();
      const double difference = (gathered.at(item.key()) - expected).abs().max().item<double>();
      EXPECT_LE(difference, 1e-5 * std::max(1.0, expected.abs().max().item<double>())) << item.key() << " on " << world << " ranks";
    }
  });
}

TEST(ActorUpdate, SameWeightsOnOneRankAndEveryLayout) {
  expect_same_update(2, -1, 2);  // FSDP 2: 4 responses per rank, 2 per micro-batch
  expect_same_update(4, -1, 1);  // FSDP 4
  expect_same_update(4, 2, 1);   // HSDP 2x2
}

TEST(ActorUpdate, LossIsTheObjectiveOfTheLogits) {
  auto model = llama();
  model->init_weights(0.2, 7);
  const rl::RolloutBatch batch = fixed_batch(*model);
  const rl::ActorUpdate update = update_with(kResponses);
  const rl::ActorUpdateStats stats = rl::actor_backward(*model, batch, update);
  torch::NoGradGuard no_grad;
  const at::Tensor log_probs = inference::token_log_probs((*model)(batch.ids), batch.ids, 0.8).log_probs;
  const at::Tensor advantages = batch.advantages.unsqueeze(1).expand_as(log_probs);
  const rl::PolicyLoss policy = rl::clipped_policy_loss(log_probs, batch.old_log_probs, advantages, batch.response_mask, update.policy);
  const double kl = rl::aggregate(rl::kl_penalty(log_probs, batch.ref_log_probs, rl::KlEstimator::kK3), batch.response_mask,
                                  rl::LossAggregation::kTokenMean).item<double>();
  EXPECT_NEAR(stats.policy_loss, policy.loss.item<double>(), 1e-6);
  EXPECT_NEAR(stats.kl, kl, 1e-6);
  EXPECT_GT(stats.clip_fraction, 0.0) << "the batch exercises the clip";
  EXPECT_NEAR(stats.clip_fraction, policy.clip_fraction, 1e-9);
  EXPECT_GT(stats.entropy, 0.0);
}

// verl's entropy_coeff: the loss less coef x the entropy aggregated as the policy loss, so the
// gradients are those without it less coef x the entropy's.
TEST(ActorUpdate, AnEntropyBonusSubtractsTheEntropysGradient) {
  auto model = llama();
  model->init_weights(0.2, 7);
  const rl::RolloutBatch batch = fixed_batch(*model);
  auto gradients = [&](double entropy_coef) {
    model->zero_grad();
    rl::ActorUpdate update = update_with(kResponses / 2);
    update.entropy_coef = entropy_coef;
    update.policy.aggregation = rl::LossAggregation::kSeqMeanTokenMean;
    rl::actor_backward(*model, batch, update);
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const auto without = gradients(0), with = gradients(0.3);
  model->zero_grad();
  for (int64_t first = 0; first < kResponses; first += kResponses / 2) {  // the entropy alone, micro-batch by micro-batch
    auto rows = [&](const at::Tensor& t) { return t.narrow(0, first, kResponses / 2); };
    const at::Tensor ids = rows(batch.ids);
    const at::Tensor entropy = inference::token_log_probs((*model)(ids), ids, 0.8).entropy;
    (rl::aggregate(entropy, rows(batch.response_mask), rl::LossAggregation::kSeqMeanTokenMean) * 0.5).backward();  // its share
  }
  const auto params = model->parameters();
  double largest = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor expected = without[i] - 0.3 * params[i].grad();
    EXPECT_TRUE(torch::allclose(with[i], expected, 1e-5, 1e-7)) << "parameter " << i;
    largest = std::max(largest, params[i].grad().abs().max().item<double>());
  }
  EXPECT_GT(largest, 1e-4) << "the entropy should have a gradient";
}

}  // namespace
}  // namespace megacpp
