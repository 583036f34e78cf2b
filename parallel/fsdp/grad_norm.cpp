#include "parallel/fsdp/grad_norm.h"

#include <cmath>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/fsdp/fsdp_param.h"

namespace megacpp::parallel::fsdp {

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm, const DeviceMesh& mesh) {
  torch::NoGradGuard no_grad;
  c10::Device device = params.empty() ? c10::Device(c10::kCPU) : params.front().device();
  auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(device);
  at::Tensor sharded_sq = torch::zeros({1}, f64), whole_sq = torch::zeros({1}, f64);
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    at::Tensor sq = p.grad().to(torch::kDouble).pow(2).sum();
    (find_fsdp_param(p) ? sharded_sq : whole_sq).add_(sq);
  }
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
