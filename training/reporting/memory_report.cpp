#include "training/reporting/memory_report.h"

#include <sys/resource.h>

#include <cstdio>

#include <torch/torch.h>
#ifdef MEGACPP_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace megacpp::training::reporting {
namespace {

constexpr double kMB = 1024.0 * 1024.0;

double bytes(const at::Tensor& t) { return t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0.0; }

double peak_mb(const c10::Device& device) {
#ifdef MEGACPP_WITH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / kMB;
  }
#endif
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0 / kMB;  // ru_maxrss is in KB on Linux
}

}  // namespace

std::string MemoryReport::format(int rank, int64_t iteration) const {
  char line[256];
  std::snprintf(line, sizeof(line),
                "[rank %d] memory (MB) | sharded params: %.3f | sharded grads: %.3f | optimizer state: %.3f | peak: %.1f | "
                "after iteration: %lld",
                rank, sharded_params_mb, sharded_grads_mb, optimizer_state_mb, this->peak_mb, static_cast<long long>(iteration));
  return line;
}

MemoryReport measure_memory(const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer,
                            const c10::Device& device) {
  MemoryReport report;
  for (const auto& p : params) {
    report.sharded_params_mb += bytes(p) / kMB;
    report.sharded_grads_mb += bytes(p.grad()) / kMB;
  }
  for (auto& [key, state] : optimizer.state()) {
    if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get())) {
      report.optimizer_state_mb += (bytes(adamw->exp_avg()) + bytes(adamw->exp_avg_sq()) + bytes(adamw->max_exp_avg_sq())) / kMB;
    }
  }
  report.peak_mb = peak_mb(device);
  return report;
}

}  // namespace megacpp::training::reporting
