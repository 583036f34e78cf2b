#include "parallel/fsdp/grad_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::parallel::fsdp {

GradNorm global_grad_norm(const std::vector<at::Tensor>& params, const DeviceMesh& mesh, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  // Each gradient's norm in fp32 or wider (16-bit gradients are widened to fp32 first), squared
  // and summed in fp64: no fp64 copy of any gradient. Four kinds, by what is summed over ranks:
  // FSDP shards of TP slices (both groups), FSDP shards (fsdp), TP slices (tp), whole (none).
  enum Kind { kShardedSlice, kSharded, kSlice, kWhole };
  std::vector<at::Tensor> norms[4];
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    const at::Tensor& grad = p.grad();
    at::Tensor norm = (grad.element_size() < 4 ? grad.to(torch::kFloat) : grad).norm(2).reshape({1}).to(torch::kDouble);
    const auto* tp = tensor_parallel_placement(p);
    const bool slice = tp && tp->is_split(), sharded = find_fsdp_param(p) != nullptr;
    norms[sharded ? (slice ? kShardedSlice : kSharded) : (slice ? kSlice : kWhole)].push_back(norm);
  }
  // Summed where collectives run: offloaded shards' norms are on the host.
  auto sum_of_squares = [&](const std::vector<at::Tensor>& kind) {
    if (kind.empty()) return torch::zeros({1}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    return torch::cat(kind).pow(2).sum().reshape({1}).to(device);
  };
  at::Tensor sharded_sq = torch::cat({sum_of_squares(norms[kShardedSlice]), sum_of_squares(norms[kSharded])});
  at::Tensor slice_sq = sum_of_squares(norms[kSlice]), whole_sq = sum_of_squares(norms[kWhole]);
  // Whether this rank's part is finite, before the sum over ranks spreads a NaN to all of them.
  at::Tensor local_finite = torch::isfinite(sharded_sq.sum() + slice_sq + whole_sq);
  all_reduce(mesh.fsdp(), sharded_sq, ReduceOp::kSum).wait();
  at::Tensor over_tp = sharded_sq.narrow(0, 0, 1) + slice_sq;
  if (mesh.tp().size() > 1) all_reduce(mesh.tp(), over_tp, ReduceOp::kSum).wait();
  return {std::sqrt((over_tp + sharded_sq.narrow(0, 1, 1) + whole_sq).item<double>()), local_finite.item<bool>()};
}

double clip_coefficient(double max_norm, double norm) {
  if (max_norm <= 0) return 1.0;
  if (!std::isfinite(norm)) {
    throw std::runtime_error("the gradient norm is " + std::to_string(norm) +
                             ": non-finite gradients cannot be clipped (--clip-grad " + std::to_string(max_norm) + ")");
  }
  return norm <= max_norm ? 1.0 : max_norm / (norm + 1e-6);
}

void clip_gradients(const std::vector<at::Tensor>& params, double max_norm, double norm) {
  const double scale = clip_coefficient(max_norm, norm);
  if (scale == 1.0) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (p.grad().defined()) p.grad().mul_(scale);
  }
}

}  // namespace megacpp::parallel::fsdp
