// The optimizer step megacpp-train and megacpp-grpo share (training/optim/optimizer.h): the gradients
// finished (missing ones zeroed, unscaled), their norm, clipping and the step.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "parallel/device_mesh.h"
#include "training/optim/optimizer.h"

namespace megacpp {
namespace {

TEST(OptimizerStep, FinishedGradientsAreWholeUnscaledAndClippedByTheirNorm) {
  torch::manual_seed(4);
  const auto mesh = parallel::DeviceMesh::single();
  const at::Tensor start = torch::randn({2, 3});
  std::vector<at::Tensor> params{start.clone().requires_grad_(true), torch::ones({4}).requires_grad_(true), torch::ones({3})};
  const at::Tensor grad = torch::randn({2, 3});
  params[0].mutable_grad() = grad.clone();

  const auto norm = training::optim::finish_gradients(params, mesh, torch::kCPU, 0.5);
  EXPECT_TRUE(torch::equal(params[0].grad(), grad * 0.5));
  ASSERT_TRUE(params[1].grad().defined()) << "a trainable parameter nothing reached steps with a zero gradient";
  EXPECT_TRUE(torch::equal(params[1].grad(), torch::zeros({4})));
  EXPECT_FALSE(params[2].grad().defined()) << "a frozen parameter gets no gradient";
  EXPECT_TRUE(norm.local_finite);
  EXPECT_NEAR(norm.total, (grad * 0.5).norm().item<double>(), 1e-6);

  torch::optim::SGD sgd(std::vector<at::Tensor>{params[0], params[1]}, torch::optim::SGDOptions(1.0));
  const double max_norm = norm.total / 4;
  training::optim::clip_and_step(sgd, params, max_norm, norm.total);
  const double coefficient = max_norm / (norm.total + 1e-6);
  EXPECT_TRUE(torch::allclose(params[0].detach(), start - grad * 0.5 * coefficient, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(params[1].detach(), torch::ones({4})));
}

}  // namespace
}  // namespace megacpp
