// Gradient clipping by the global norm over every rank's shards.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "parallel/device_mesh.h"

namespace megacpp::parallel::fsdp {

struct GradNorm {
  double total = 0;          // the global norm, the same on every rank of the fsdp group
  bool local_finite = true;  // this rank's own gradients (its shards and whole gradients) are finite
};

// The L2 norm of all gradients of `params` as if they were whole: squares of sharded gradients
// are summed over the fsdp group (replicas in ddp hold the same shard), whole (unsharded)
// gradients count once; TP slices are summed over the TP group, replicated parameters count once
// (Note [Tensor parallelism]). Collective over the fsdp (and TP) group, on `device` (the compute device, where
// the group communicates; offloaded gradients are on the host).
GradNorm global_grad_norm(const std::vector<at::Tensor>& params, const DeviceMesh& mesh, const c10::Device& device);

// The factor clipping multiplies every gradient by: max_norm / (norm + 1e-6) if `max_norm` > 0
// and `norm` exceeds it, else 1. A non-finite `norm` cannot be clipped: throws
// std::runtime_error (as PyTorch's clip_grad_norm_ with error_if_nonfinite) instead of leaving
// the gradients unclipped.
double clip_coefficient(double max_norm, double norm);

// Scales every gradient of `params` by clip_coefficient(max_norm, norm).
void clip_gradients(const std::vector<at::Tensor>& params, double max_norm, double norm);

}  // namespace megacpp::parallel::fsdp
