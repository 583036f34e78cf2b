// Options of fully_shard, as in torch.distributed.fsdp.fully_shard.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/Optional.h>

namespace megacpp::parallel::fsdp {

struct MixedPrecisionPolicy {
  c10::optional<at::ScalarType> param_dtype;   // dtype of gathered parameters (compute)
  c10::optional<at::ScalarType> reduce_dtype;  // dtype gradients are reduced in
  c10::optional<at::ScalarType> output_dtype;  // cast of the module's floating output
  bool cast_forward_inputs = true;             // cast floating inputs to param_dtype
};

struct FullyShardOptions {
  // Free the gathered parameters after forward and gather again before backward. Ignored
  // for the root module, which keeps them (there is no gap before its backward).
  bool reshard_after_forward = true;
  MixedPrecisionPolicy mixed_precision;
  c10::Device device{c10::kCPU};  // where compute lives, and the shards unless offloaded
  // FSDP2's CPUOffloadPolicy: the fp32 sharded masters, so their gradients and the optimizer
  // state, live in host memory (pinned with pin_memory) and are copied to `device` just before
  // each all-gather; reduced gradients are copied back and the optimizer steps on the host.
  // Needs a CUDA `device`.
  bool offload_to_cpu = false;
  bool pin_memory = true;
  // Parameters this call must not shard: kept whole on every rank; their gradients are
  // averaged over all data-parallel ranks at the end of backward (like DDP).
  std::vector<at::Tensor> ignored_params;
};

}  // namespace megacpp::parallel::fsdp
