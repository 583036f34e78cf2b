// Per-rank memory figures for the "[rank R] memory (MB)" line.
#pragma once

#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

namespace megacpp::training::reporting {

struct MemoryReport {
  double sharded_params_mb = 0;  // this rank's parameter storage (shards under FSDP)
  double sharded_grads_mb = 0;
  double optimizer_state_mb = 0;
  double peak_mb = 0;  // since the start: max RSS on CPU, the caching allocator's peak on CUDA

  std::string format(int rank, int64_t iteration) const;
};

MemoryReport measure_memory(const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer,
                            const c10::Device& device);

}  // namespace megacpp::training::reporting
