// The public FSDP2 API: fully_shard and the per-module controls of torch's FSDPModule.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parallel/device_mesh.h"
#include "parallel/fsdp/fsdp_state.h"
#include "parallel/fsdp/options.h"
#include "parallel/module.h"

namespace megacpp::parallel::fsdp {

// Shards every parameter in `module`'s tree that no nested fully_shard call owns and that is
// not in options.ignored_params, and installs the hooks that gather them for forward and
// backward and reduce their gradients. Apply bottom-up: layers first, then the root.
// `mesh` must outlive the module.
FSDPState& fully_shard(Module& module, const DeviceMesh& mesh, const FullyShardOptions& options);

// The state fully_shard attached to `module`, or null.
FSDPState* fsdp_state(const Module& module);

// Gather these modules' parameters early: right after `module`'s own gather in forward /
// in backward. All must be fully_shard'ed modules.
void set_modules_to_forward_prefetch(Module& module, const std::vector<Module*>& modules);
void set_modules_to_backward_prefetch(Module& module, const std::vector<Module*>& modules);

// Gradient accumulation: with sync off, backward keeps gradients unsharded and local; the
// next backward with sync on reduces everything accumulated. Applies to the whole tree.
void set_requires_gradient_sync(Module& root, bool sync);

// FSDP2's set_gradient_divide_factor: every group of `root`'s tree divides its reduced
// gradients by `factor` instead of the data-parallel size.
void set_gradient_divide_factor(Module& root, double factor);

// FSDP2's FSDPModule.reshard(): frees `module`'s gathered parameters now. The root keeps its own
// after forward (its backward would gather them at once); a forward-only run frees them so.
void reshard(Module& module);

// The full shape of a parameter, sharded or not (over the fsdp group and the TP group: Note
// [Tensor parallelism] in parallel/tensor_parallel.h).
std::vector<int64_t> full_shape(const at::Tensor& param);

// Writes `full` into `param`: this rank's part when it is a sharded master or a TP slice, all of
// it otherwise.
void copy_full_into_parameter(const at::Tensor& param, const at::Tensor& full);

// `param` at full size in its gathered dtype (FSDP2's fp32 master, else its own): gathered from
// its shards (collective over the shard group) and its TP slices (collective over the TP group),
// or `param` itself, detached, when it is neither.
at::Tensor gather_full_parameter(const at::Tensor& param);

// Every parameter of `root` by fully-qualified name, full size in fp32 (sharded ones are
// gathered: collective over the shard group and, for TP slices, the TP group).
std::map<std::string, at::Tensor> gather_full_parameters(torch::nn::Module& root);

}  // namespace megacpp::parallel::fsdp
