// Gradient clipping by the global norm over every rank's shards.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "parallel/device_mesh.h"

namespace megacpp::parallel::fsdp {

// The L2 norm of all gradients of `params` as if they were whole: squares of sharded
// gradients are summed over the fsdp group (replicas in ddp hold the same shard), whole
// (unsharded) gradients count once. If `max_norm` > 0 and the norm exceeds it, every
// gradient is scaled by max_norm / (norm + 1e-6). Returns the norm before clipping. Collective.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm, const DeviceMesh& mesh);

}  // namespace megacpp::parallel::fsdp
