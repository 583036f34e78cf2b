// TiledMLP (Note [Tiled forward] in parallel/tiled_forward.h): an MLP run over tiles of the
// sequence, each recomputed, gives the outputs and gradients of one call, alone and under
// recompute; a sequence shorter than the tile count runs whole.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/layers/mlp.h"
#include "parallel/recompute.h"
#include "parallel/tiled_forward.h"

namespace megacpp {
namespace {

struct Pass {
  at::Tensor output, input_grad;
  std::vector<at::Tensor> param_grads;
};

Pass run(models::SwiGLUMLP& mlp, const at::Tensor& x) {
  for (auto& p : mlp.parameters()) p.mutable_grad() = at::Tensor();
  at::Tensor input = x.clone().requires_grad_(true);
  at::Tensor out = mlp(input);
  (out * out).sum().backward();
  Pass pass{out.detach(), input.grad(), {}};
  for (auto& p : mlp.parameters()) pass.param_grads.push_back(p.grad().clone());
  return pass;
}

// Equal up to fp32 rounding: the tiles' sums over tokens are added in another order.
bool close(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() <= 1e-6 * std::max(1.0, a.abs().max().item<double>());
}

void expect_close(const Pass& a, const Pass& b, const std::string& what) {
  EXPECT_TRUE(close(a.output, b.output)) << what;
  EXPECT_TRUE(close(a.input_grad, b.input_grad)) << what;
  ASSERT_EQ(a.param_grads.size(), b.param_grads.size());
  for (size_t i = 0; i < a.param_grads.size(); ++i) EXPECT_TRUE(close(a.param_grads[i], b.param_grads[i])) << what << ": parameter " << i;
}

TEST(TiledMlp, SameOutputsAndGradientsAsOneCall) {
  torch::manual_seed(3);
  models::SwiGLUMLP plain(16, 40, torch::kFloat), tiled(16, 40, torch::kFloat), both(16, 40, torch::kFloat);
  {
    torch::NoGradGuard no_grad;  // layers allocate their weights; WeightInitMixin fills them in a model
    for (auto& p : plain.parameters()) p.normal_(0.0, 0.3);
    for (auto* mlp : {&tiled, &both}) {
      auto from = plain.parameters();
      auto to = mlp->parameters();
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
  }
  parallel::enable_tiled_forward(tiled, 4, 1);
  parallel::enable_tiled_forward(both, 3, 1);
  parallel::enable_recompute(both);  // recompute around the tiles
  const at::Tensor x = torch::randn({2, 10, 16});  // 10 tokens: tiles of 3, 3, 3, 1 and 4, 4, 2
  const Pass reference = run(plain, x);
  expect_close(reference, run(tiled, x), "4 tiles");
  expect_close(reference, run(both, x), "3 tiles under recompute");
  expect_close(run(plain, x.narrow(1, 0, 2)), run(tiled, x.narrow(1, 0, 2)), "2 tokens, fewer than the tiles");
  {
    torch::NoGradGuard no_grad;  // validation: no recompute, still tiles
    EXPECT_TRUE(close(plain(x), tiled(x)));
  }
}

}  // namespace
}  // namespace megacpp
