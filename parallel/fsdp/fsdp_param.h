// One sharded parameter: its fp32 master shard, the gathered compute tensor, and the slots
// of the modules that read it.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "parallel/fsdp/shard_layout.h"
#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel::fsdp {

class FSDPParam {
 public:
  struct Use {
    Module* module;
    std::string name;  // slot name in `module`
  };

  // Where the shard and the gathered parameter live: compute on `device`; the shard there too,
  // or in (pinned) host memory when offloaded.
  struct Placement {
    c10::Device device;
    at::ScalarType param_dtype;
    bool offload_to_cpu = false;
    bool pin_memory = true;
  };

  // `original` is the full parameter (on any device, meta included); the shard group's rank selects
  // this rank's chunk of it. When `original` is on the meta device the shard is allocated
  // uninitialized (WeightInitMixin or a checkpoint fills it).
  FSDPParam(std::string fqn, std::vector<Use> uses, const at::Tensor& original,
            ShardLayout layout, const Group& shard_group, const Placement& placement);
  ~FSDPParam();
  FSDPParam(const FSDPParam&) = delete;
  FSDPParam& operator=(const FSDPParam&) = delete;

  const std::string& fqn() const { return fqn_; }
  const std::vector<Use>& uses() const { return uses_; }  // the slots that read it
  const ShardLayout& layout() const { return layout_; }
  bool requires_grad() const { return requires_grad_; }

  const at::Tensor& sharded() const { return sharded_; }      // [rows_on(rank), *rest] fp32
  const at::Tensor& unsharded() const { return unsharded_; }  // [rows, *rest] param_dtype

  // Copies this rank's shard, cast and zero-padded, into `slot` [padded_numel] (on the compute
  // device: from pinned host memory without blocking).
  void copy_shard_to(const at::Tensor& slot) const;
  // Allocates the unsharded storage and fills it from `gathered` [world, group_numel],
  // this parameter's columns starting at `offset`.
  void copy_out(const at::Tensor& gathered, int64_t offset);
  void free_unsharded();

  void point_modules_at_unsharded();
  void point_modules_at_sharded();

  // Writes the unsharded gradient (zeros if none), padded, into `columns` [world, padded_numel]
  // and drops it.
  void pack_gradient(const at::Tensor& columns);
  // Adds this rank's reduced chunk `chunk` [padded_numel] into the sharded master's grad (on the
  // master's device).
  void accumulate_sharded_grad(const at::Tensor& chunk);

  // The full fp32 parameter [rows, *rest] on the compute device, gathered from the shard group.
  // Collective.
  at::Tensor gather_full() const;
  // Keeps this rank's rows of `full` [rows, *rest] as the shard (initialization, loading).
  void load_full(const at::Tensor& full);

 private:
  std::string fqn_;
  std::vector<Use> uses_;
  ShardLayout layout_;
  const Group& shard_group_;
  c10::Device compute_device_;
  bool pinned_;  // the shard is in pinned host memory: copied to the device without blocking
  bool requires_grad_;
  at::Tensor sharded_;           // [rows_on(rank), *rest] fp32 master, the optimizer's tensor
  at::Tensor unsharded_padded_;  // [world * chunk_rows, *rest] param_dtype; Note [Freeing storage under autograd]
  at::Tensor unsharded_writer_;  // alias of unsharded_padded_ with its own version counter
  at::Tensor unsharded_;         // [rows, *rest] leaf the modules compute with
};

// The FSDPParam whose sharded master is `tensor`, or null if `tensor` is not sharded.
FSDPParam* find_fsdp_param(const at::Tensor& tensor);

}  // namespace megacpp::parallel::fsdp
