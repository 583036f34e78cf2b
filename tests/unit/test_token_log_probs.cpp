// token_log_probs (inference/token_log_probs.h) against the formulas in fp64: each next token's
// log-probability, the entropy of each position, with a temperature, in chunks of any size,
// from bf16 logits; their mean is the cross-entropy loss; gradients reach the logits; bad
// shapes, ids and temperatures are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include "inference/token_log_probs.h"

namespace megacpp {
namespace {

using inference::token_log_probs;

// log p and entropy by the definitions, in fp64, one position at a time.
std::pair<at::Tensor, at::Tensor> by_definition(const at::Tensor& logits, const at::Tensor& ids, double temperature) {
  const at::Tensor z = logits.to(torch::kDouble) / temperature;
  const int64_t batch = ids.size(0), scored = ids.size(1) - 1;
  at::Tensor log_p = torch::empty({batch, scored}, torch::kDouble), entropy = torch::empty({batch, scored}, torch::kDouble);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < scored; ++t) {
      const at::Tensor row = z[b][t];
      const double lse = std::log(row.exp().sum().item<double>());
      const at::Tensor p = (row - lse).exp();
      log_p[b][t] = row[ids[b][t + 1].item<int64_t>()].item<double>() - lse;
      entropy[b][t] = (p * (lse - row)).sum().item<double>();
    }
  }
  return {log_p, entropy};
}

double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

TEST(TokenLogProbs, AreTheDefinitionsWithTemperatureInAnyChunks) {
  torch::manual_seed(5);
  const at::Tensor logits = torch::randn({3, 9, 37}) * 3, ids = torch::randint(0, 37, {3, 9});
  for (double temperature : {1.0, 0.7}) {
    const auto [log_p, entropy] = by_definition(logits, ids, temperature);
    for (int64_t chunk : {int64_t{1024}, int64_t{5}, int64_t{1}}) {
      const auto got = token_log_probs(logits, ids, temperature, true, chunk);
      ASSERT_EQ(got.log_probs.sizes(), (std::vector<int64_t>{3, 8}));
      EXPECT_EQ(got.log_probs.scalar_type(), torch::kFloat);
      EXPECT_LE(largest_difference(got.log_probs, log_p), 1e-5) << "temperature " << temperature << ", chunk " << chunk;
      EXPECT_LE(largest_difference(got.entropy, entropy), 1e-5) << "temperature " << temperature << ", chunk " << chunk;
    }
  }
  // Their mean is the language-model loss of the same logits; equal logits give log V entropy.
  const auto got = token_log_probs(logits, ids, 1.0, false);
  EXPECT_FALSE(got.entropy.defined());
  const at::Tensor loss = torch::cross_entropy_loss(logits.narrow(1, 0, 8).reshape({-1, 37}), ids.narrow(1, 1, 8).reshape({-1}));
  EXPECT_NEAR(-got.log_probs.mean().item<double>(), loss.item<double>(), 1e-5);
  const auto uniform = token_log_probs(torch::zeros({1, 4, 37}), torch::zeros({1, 4}, torch::kLong));
  EXPECT_LE(largest_difference(uniform.entropy, torch::full({1, 3}, std::log(37.0))), 1e-5);
  EXPECT_LE(largest_difference(uniform.log_probs, torch::full({1, 3}, -std::log(37.0))), 1e-5);
}

TEST(TokenLogProbs, TakeBf16LogitsAndPassGradients) {
  torch::manual_seed(6);
  const at::Tensor logits = torch::randn({2, 6, 11}), ids = torch::randint(0, 11, {2, 6});
  const at::Tensor half = logits.to(torch::kBFloat16);
  const auto [log_p, entropy] = by_definition(half, ids, 1.0);
  EXPECT_LE(largest_difference(token_log_probs(half, ids).log_probs, log_p), 1e-5) << "computed in fp32 from the bf16 values";
  // d(sum log p)/d logits = one-hot(next) - softmax, at every scored position; zero at the last.
  const at::Tensor leaf = logits.clone().requires_grad_(true);
  token_log_probs(leaf, ids, 1.0, false, 4).log_probs.sum().backward();
  const at::Tensor expected = torch::zeros_like(logits);
  expected.narrow(1, 0, 5).copy_(torch::one_hot(ids.narrow(1, 1, 5), 11).to(torch::kFloat) -
                                 torch::softmax(logits.narrow(1, 0, 5), -1));
  EXPECT_LE(largest_difference(leaf.grad(), expected), 1e-5);
}

TEST(TokenLogProbs, RefuseBadShapesIdsAndTemperatures) {
  const at::Tensor logits = torch::zeros({2, 4, 5});
  auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { token_log_probs(logits, torch::zeros({2, 3}, torch::kLong)); }).find("[2, 4, 5] and ids [2, 3]"),
            std::string::npos);
  EXPECT_NE(message([&] { token_log_probs(logits, torch::full({2, 4}, 5, torch::kLong)); }).find("token id 5 is outside the vocabulary of 5"),
            std::string::npos);
  EXPECT_NE(message([&] { token_log_probs(logits, torch::zeros({2, 4}, torch::kLong), 0.0); }).find("temperature must be positive"),
            std::string::npos);
  EXPECT_NE(message([&] { token_log_probs(logits, torch::zeros({2, 4}, torch::kInt)); }).find("ids must be int64"), std::string::npos);
}

}  // namespace
}  // namespace megacpp
