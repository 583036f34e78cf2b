// rl/reward_shaping.h against tests/reference/roll_advantages_reference.py (NumPy, written from
// ROLL's functionals.py on token-level tensors as ROLL holds them): GRPO's advantages, ROLL's
// Ascend RLVR example's REINFORCE with whitening, clips and both masks, batch normalization with
// error_max_len_clip, group mean over the batch's deviation; and the same batch split over two
// ranks (the batch's statistics summed by an all-reduce) gives one rank's advantages.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "parallel/collectives.h"
#include "rl/objective_options.h"
#include "rl/reward_shaping.h"
#include "tests/support/command.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

using nlohmann::json;

constexpr int64_t kGroupSize = 4, kMaxNewTokens = 8, kTokens = 10;
const std::vector<double> kScores{1, 0, 1, 0, /**/ 1, 1, 1, 1, /**/ 0, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 1, 0.5, 0, 1};
const std::vector<int64_t> kLengths{3, 8, 5, 2, /**/ 4, 6, 8, 1, /**/ 8, 2, 3, 7, /**/ 5, 8, 6, 2, /**/ 7, 3, 4, 8};

rl::ResponseOutcomes outcomes(int64_t first, int64_t count) {
  rl::ResponseOutcomes o;
  o.scores = torch::tensor(std::vector<double>(kScores.begin() + first, kScores.begin() + first + count), torch::kDouble);
  o.lengths = torch::tensor(std::vector<int64_t>(kLengths.begin() + first, kLengths.begin() + first + count), torch::kLong);
  for (int64_t i = first; i < first + count; ++i) o.groups.push_back(i / kGroupSize);
  o.max_new_tokens = kMaxNewTokens;
  return o;
}

json roll_keys(const rl::ObjectiveOptions& o) {
  auto norm = [](const std::string& v) { return v.empty() || v == "none" ? json(nullptr) : json(v); };
  return {{"adv_estimator", o.adv_estimator},
          {"norm_mean_type", norm(o.norm_mean_type)},
          {"norm_std_type", norm(o.norm_std_type)},
          {"reward_clip", o.reward_clip > 0 ? json(o.reward_clip) : json(nullptr)},
          {"advantage_clip", o.advantage_clip > 0 ? json(o.advantage_clip) : json(nullptr)},
          {"whiten_advantages", o.whiten_advantages},
          {"max_len_mask", o.max_len_mask},
          {"difficulty_mask", o.difficulty_mask},
          {"difficulty_low_threshold", o.difficulty_low.value_or(0.0)},
          {"difficulty_high_threshold", o.difficulty_high.value_or(1.0)},
          {"error_max_len_clip", o.error_max_len_clip},
          {"error_max_len_threshold", o.error_max_len_threshold.value_or(9999999999)}};
}

json reference(const rl::ObjectiveOptions& o) {
  json input = roll_keys(o);
  input["scores"] = kScores;
  input["lengths"] = kLengths;
  input["n_sample"] = kGroupSize;
  input["max_response_length"] = kMaxNewTokens;
  input["tokens"] = kTokens;
  const std::string path = testing::scratch_dir() + "/roll_batch.json";
  std::ofstream(path) << input.dump();
  const auto run = testing::run_command(testing::reference_script("roll_advantages_reference.py") + " < " + path);
  EXPECT_EQ(run.status, 0) << run.output;
  return json::parse(run.output);
}

// ROLL's per-token advantages from megacpp's per-response ones.
void expect_roll_advantages(const rl::ShapedAdvantages& shaped, const json& want, const std::string& what) {
  for (size_t i = 0; i < kScores.size(); ++i) {
    for (int64_t t = 0; t < kTokens; ++t) {
      const double counted = want["final_response_mask"][i][t].get<double>();
      const double got = t < kLengths[i] ? shaped.advantages[static_cast<int64_t>(i)].item<double>() : 0.0;
      EXPECT_NEAR(got * counted, want["advantages"][i][t].get<double>(), 1e-5) << what << ", response " << i << ", token " << t;
      if (t == 0) EXPECT_EQ(shaped.kept[static_cast<int64_t>(i)].item<double>(), counted) << what << ", response " << i;
    }
  }
}

std::vector<std::pair<std::string, rl::ObjectiveOptions>> cases() {
  rl::ObjectiveOptions grpo;
  rl::ObjectiveOptions ascend;  // ROLL's examples/ascend_examples/qwen3_0_6b_rlvr_megatron_*.yaml
  ascend.adv_estimator = "reinforce";
  ascend.reward_clip = 10;
  ascend.advantage_clip = 2.0;
  ascend.whiten_advantages = ascend.max_len_mask = ascend.difficulty_mask = true;
  ascend.difficulty_low = 0.1;
  ascend.difficulty_high = 0.95;
  rl::ObjectiveOptions batch;
  batch.adv_estimator = "reinforce";
  batch.norm_mean_type = batch.norm_std_type = "batch";
  batch.reward_clip = 0.9;
  batch.error_max_len_clip = true;
  batch.error_max_len_threshold = 5;
  rl::ObjectiveOptions mixed;
  mixed.adv_estimator = "reinforce";
  mixed.norm_mean_type = "group";
  mixed.norm_std_type = "batch";
  mixed.whiten_advantages = true;
  mixed.advantage_clip = 0.7;
  return {{"grpo", grpo}, {"ascend example", ascend}, {"batch", batch}, {"group mean, batch deviation", mixed}};
}

const rl::SumOverBatch kOneRank = [](const at::Tensor& t) { return t; };

TEST(RewardShaping, AdvantagesAndMasksAreRollsNumPyReference) {
  for (const auto& [what, options] : cases()) {
    const rl::ShapedAdvantages shaped = rl::shape_advantages(outcomes(0, kScores.size()), rl::reward_shaping(options), kOneRank);
    expect_roll_advantages(shaped, reference(options), what);
    EXPECT_EQ(shaped.responses, kScores.size()) << what;
  }
  // The cases drop some responses and keep others.
  const rl::ShapedAdvantages ascend = rl::shape_advantages(outcomes(0, kScores.size()), rl::reward_shaping(cases()[1].second), kOneRank);
  EXPECT_GT(ascend.kept_responses, 0);
  EXPECT_LT(ascend.kept_responses, ascend.responses);
}

TEST(RewardShaping, TwoRanksShapeAsOne) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const rl::SumOverBatch over_ranks = [&rt](const at::Tensor& mine) {
      at::Tensor total = mine.clone();
      parallel::all_reduce(rt.world(), total, parallel::ReduceOp::kSum).wait();
      return total;
    };
    const int64_t half = static_cast<int64_t>(kScores.size()) / 2;  // whole groups: 10 responses each
    for (const auto& [what, options] : cases()) {
      const rl::RewardShaping shaping = rl::reward_shaping(options);
      const rl::ShapedAdvantages whole = rl::shape_advantages(outcomes(0, kScores.size()), shaping, kOneRank);
      const rl::ShapedAdvantages mine = rl::shape_advantages(outcomes(rt.rank() * half, half), shaping, over_ranks);
      EXPECT_TRUE(torch::allclose(mine.advantages, whole.advantages.narrow(0, rt.rank() * half, half), 1e-6, 1e-6)) << what;
      if (shaping.needs_batch()) EXPECT_EQ(mine.kept_responses, whole.kept_responses) << what;
    }
  });
}

TEST(RewardShaping, FlagsThatCannotBeHonouredAreRefused) {
  auto refused = [](const std::function<void(rl::ObjectiveOptions&)>& edit, const std::string& needle) {
    rl::ObjectiveOptions o;
    edit(o);
    try {
      rl::reward_shaping(o);
      rl::policy_loss_options(o);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  };
  refused([](auto& o) { o.adv_estimator = "gae"; }, "--adv-estimator gae");
  refused([](auto& o) { o.norm_std_type = "batch"; }, "--norm-std-type batch");
  refused([](auto& o) { o.adv_estimator = "reinforce", o.norm_mean_type = "running"; }, "--norm-mean-type");
  refused([](auto& o) { o.difficulty_low = 0.2; }, "--difficulty-mask");
  refused([](auto& o) { o.difficulty_mask = true, o.difficulty_low = 0.5, o.difficulty_high = 0.5; }, "--difficulty-low-threshold");
  refused([](auto& o) { o.error_max_len_threshold = 4; }, "--error-max-len-clip");
  refused([](auto& o) { o.dual_clip_ratio = 0.5; }, "--dual-clip-ratio");
  refused([](auto& o) { o.loss_agg_mode = "seq-sum"; }, "--loss-agg-mode");
  refused([](auto& o) { o.clip_ratio_low = 1.5; }, "--clip-ratio-low");
  refused([](auto& o) { o.importance_sampling = "sequence"; }, "--importance-sampling sequence");
}

}  // namespace
}  // namespace megacpp
