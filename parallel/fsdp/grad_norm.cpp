#include "parallel/fsdp/grad_norm.h"

#include <cmath>
#include <vector>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/fsdp/fsdp_param.h"

namespace megacpp::parallel::fsdp {

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm, const DeviceMesh& mesh) {
  torch::NoGradGuard no_grad;
  // Each gradient's norm in fp32 or wider (16-bit gradients are widened to fp32 first), squared
  // and summed in fp64: no fp64 copy of any gradient.
  std::vector<at::Tensor> sharded_norms, whole_norms;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    const at::Tensor& grad = p.grad();
    at::Tensor norm = (grad.element_size() < 4 ? grad.to(torch::kFloat) : grad).norm(2).reshape({1}).to(torch::kDouble);
    (find_fsdp_param(p) ? sharded_norms : whole_norms).push_back(norm);
  }
  c10::Device device = params.empty() ? c10::Device(c10::kCPU) : params.front().device();
  auto sum_of_squares = [&](const std::vector<at::Tensor>& norms) {
    if (norms.empty()) return torch::zeros({1}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    return torch::cat(norms).pow(2).sum().reshape({1});
  };
  at::Tensor sharded_sq = sum_of_squares(sharded_norms), whole_sq = sum_of_squares(whole_norms);
  all_reduce(mesh.fsdp(), sharded_sq, ReduceOp::kSum).wait();
  const double norm = std::sqrt((sharded_sq + whole_sq).item<double>());
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

}  // namespace megacpp::parallel::fsdp
