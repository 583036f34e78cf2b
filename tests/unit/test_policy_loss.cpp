// rl/policy_loss.h against tests/reference/grpo_reference.py (NumPy, written from verl's
// core_algos.py) on a fixed batch: GRPO's group advantages (a group of one, a group whose
// scores are all equal), the dual-clipped policy loss under the three aggregations (a response
// without a counted token left out of the sequence means), without the dual clip and with ROLL's
// sequence-level ratio, its clip
// fraction and approximate KL, and the four KL estimators; unknown names are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "rl/policy_loss.h"
#include "rl/reward_shaping.h"
#include "tests/support/command.h"
#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

using nlohmann::json;

json rows_of(const at::Tensor& t) {
  json rows = json::array();
  for (int64_t r = 0; r < t.size(0); ++r) {
    const at::Tensor row = t[r].to(torch::kDouble).contiguous();
    rows.push_back(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()));
  }
  return rows;
}

at::Tensor tensor_of(const json& value) {
  if (!value.is_array() || value.empty() || !value[0].is_array()) return torch::tensor(value.get<std::vector<double>>(), torch::kDouble);
  std::vector<at::Tensor> rows;
  for (const auto& row : value) rows.push_back(torch::tensor(row.get<std::vector<double>>(), torch::kDouble));
  return torch::stack(rows);
}

void expect_close(const at::Tensor& got, const json& expected, const std::string& what) {
  const at::Tensor want = tensor_of(expected);
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LE((got.to(torch::kDouble) - want).abs().max().item<double>(), 1e-5) << what;
}

TEST(PolicyLoss, GrpoAdvantagesLossesAndKlAreTheNumPyReferences) {
  torch::manual_seed(11);
  const std::vector<int64_t> groups{0, 0, 0, 1, 1, 2, 3, 3};
  const at::Tensor scores = torch::tensor({1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.5, 2.0}, torch::kFloat);
  const int64_t n = 8, tokens = 7;
  const at::Tensor log_probs = -torch::rand({n, tokens}) * 2;
  const at::Tensor old_log_probs = log_probs + torch::randn({n, tokens}) * 0.4;
  const at::Tensor ref_log_probs = log_probs + torch::randn({n, tokens}) * 0.6;
  const at::Tensor lengths = torch::tensor({7, 3, 5, 1, 6, 0, 7, 4});  // one response without a counted token
  const at::Tensor mask = torch::arange(tokens).unsqueeze(0).lt(lengths.unsqueeze(1)).to(torch::kFloat);
  const rl::PolicyLossOptions options{0.2, 0.28, 3.0, rl::LossAggregation::kTokenMean};

  json batch = {{"scores", std::vector<double>{1, 0, 1, 0, 0, 1, 0.5, 2}}, {"groups", groups}, {"log_probs", rows_of(log_probs)},
                {"old_log_probs", rows_of(old_log_probs)}, {"ref_log_probs", rows_of(ref_log_probs)}, {"mask", rows_of(mask)},
                {"clip_low", 0.2}, {"clip_high", 0.28}, {"dual_clip", 3.0}, {"epsilon", 1e-6}};
  const std::string input = testing::scratch_dir() + "/grpo_batch.json";
  std::ofstream(input) << batch.dump();
  const auto run = testing::run_command(testing::reference_script("grpo_reference.py") + " < " + input);
  ASSERT_EQ(run.status, 0) << run.output;
  const json reference = json::parse(run.output);

  const at::Tensor advantages = rl::group_advantages(scores, groups);
  expect_close(advantages, reference["advantages"], "advantages");
  expect_close(rl::group_advantages(scores, groups, /*divide_by_std=*/false), reference["advantages_no_std"], "advantages, Dr. GRPO");
  const at::Tensor per_token = advantages.unsqueeze(1) * mask;
  const at::Tensor policy = log_probs.clone().requires_grad_(true);
  for (const std::string mode : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}) {
    rl::PolicyLossOptions o = options;
    o.aggregation = rl::loss_aggregation_named(mode);
    const rl::PolicyLoss loss = rl::clipped_policy_loss(policy, old_log_probs, per_token, mask, o);
    EXPECT_NEAR(loss.loss.item<double>(), reference["loss " + mode].get<double>(), 1e-5) << mode;
    EXPECT_TRUE(loss.loss.requires_grad()) << mode;
    EXPECT_NEAR(loss.clip_fraction, reference["clip_fraction"].get<double>(), 1e-6);
    EXPECT_NEAR(loss.approx_kl, reference["approx_kl"].get<double>(), 1e-5);
  }
  rl::PolicyLossOptions no_dual = options;
  no_dual.dual_clip = 0;
  const double without = rl::clipped_policy_loss(policy, old_log_probs, per_token, mask, no_dual).loss.item<double>();
  EXPECT_NEAR(without, reference["loss no dual clip"].get<double>(), 1e-5);
  EXPECT_GT(std::abs(without - reference["loss token-mean"].get<double>()), 1e-4) << "the dual clip should bite on this batch";
  rl::PolicyLossOptions sequence = options;
  sequence.sequence_ratio = true;
  sequence.aggregation = rl::LossAggregation::kSeqMeanTokenMean;
  const rl::PolicyLoss by_sequence = rl::clipped_policy_loss(policy, old_log_probs, per_token, mask, sequence);
  EXPECT_NEAR(by_sequence.loss.item<double>(), reference["loss sequence ratio"].get<double>(), 1e-5);
  EXPECT_NEAR(by_sequence.clip_fraction, reference["clip_fraction sequence ratio"].get<double>(), 1e-6);
  EXPECT_GT(std::abs(by_sequence.loss.item<double>() - reference["loss seq-mean-token-mean"].get<double>()), 1e-4)
      << "a sequence's ratio should differ from its tokens'";
  EXPECT_GT(reference["clip_fraction"].get<double>(), 0.0) << "the batch should clip some tokens";
  for (const std::string name : {"kl", "abs", "mse", "low_var_kl"}) {
    const at::Tensor kl = rl::kl_penalty(log_probs, ref_log_probs, rl::kl_estimator_named(name));
    expect_close(kl, reference["kl " + name], "KL " + name);
    EXPECT_NEAR(rl::aggregate(kl, mask, rl::LossAggregation::kTokenMean).item<double>(), reference["kl mean " + name].get<double>(), 1e-5)
        << name;
  }
}

TEST(PolicyLoss, UnknownNamesAndShapesAreRefused) {
  EXPECT_THROW(rl::kl_estimator_named("k4"), std::invalid_argument);
  EXPECT_THROW(rl::loss_aggregation_named("seq-sum"), std::invalid_argument);
  EXPECT_THROW(rl::group_advantages(torch::zeros({3}), {0, 1}), std::invalid_argument);
  EXPECT_THROW(rl::clipped_policy_loss(torch::zeros({2, 3}), torch::zeros({2, 3}), torch::zeros({2, 4}), torch::ones({2, 3})),
               std::invalid_argument);
}

}  // namespace
}  // namespace megacpp
