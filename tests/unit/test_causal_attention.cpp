// compat::causal_attention (SDPA on libtorch 2.x, query blocks on 1.13) against the textbook
// formula with a full masked score matrix, in double, across several query blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "parallel/compat.h"

namespace megacpp::parallel {
namespace {

at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t seq = q.size(-2);
  at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor future = torch::ones({seq, seq}, q.options().dtype(torch::kBool)).triu(1);
  return torch::matmul(torch::softmax(scores.masked_fill(future, -std::numeric_limits<double>::infinity()), -1), v);
}

TEST(CausalAttention, MatchesTheFullMaskedFormulaAndItsGradientsAcrossQueryBlocks) {
  torch::manual_seed(3);
  for (int64_t seq : {1, 7, 256, 600}) {  // one block, part of one, exactly one, three
    auto make = [&] { return torch::randn({2, 3, seq, 8}, torch::kDouble).requires_grad_(); };
    at::Tensor q = make(), k = make(), v = make();
    at::Tensor out = compat::causal_attention(q, k, v);
    at::Tensor weights = torch::randn_like(out);
    auto grads = torch::autograd::grad({(out * weights).sum()}, {q, k, v});

    at::Tensor q2 = q.detach().requires_grad_(), k2 = k.detach().requires_grad_(), v2 = v.detach().requires_grad_();
    at::Tensor expected = reference_attention(q2, k2, v2);
    auto expected_grads = torch::autograd::grad({(expected * weights).sum()}, {q2, k2, v2});

    EXPECT_TRUE(torch::allclose(out, expected, 1e-10, 1e-12)) << "seq " << seq;
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(torch::allclose(grads[i], expected_grads[i], 1e-9, 1e-11)) << "seq " << seq << " grad " << i;
    }
  }
}

TEST(CausalAttention, Bfloat16StaysCloseToFloat) {
  torch::manual_seed(4);
  at::Tensor q = torch::randn({1, 2, 300, 16}), k = torch::randn({1, 2, 300, 16}), v = torch::randn({1, 2, 300, 16});
  at::Tensor exact = compat::causal_attention(q, k, v);
  at::Tensor half = compat::causal_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16));
  EXPECT_EQ(half.scalar_type(), torch::kBFloat16);
  EXPECT_LT((half.to(torch::kFloat) - exact).abs().max().item<float>(), 0.05);
}

}  // namespace
}  // namespace megacpp::parallel
