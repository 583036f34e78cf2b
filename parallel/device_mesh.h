// The device mesh: the one object that knows how ranks are laid out. A 1-D mesh (fsdp) or,
// for HSDP, a 2-D mesh (ddp, fsdp) with rank = ddp_index * fsdp_size + fsdp_index, so the
// ranks of one shard group are contiguous (as in torch's init_device_mesh).
//
// With tensor parallelism (dims.tp > 1) the TP groups are consecutive ranks and the fsdp and ddp
// groups stride over them: rank = (ddp_index * fsdp_size + fsdp_index) * tp + tp_index
// (Megatron's order: on 4 ranks with tp 2, TP {0, 1} {2, 3}, fsdp {0, 2} {1, 3}).
//
// Context parallelism (dims.cp: Ulysses, --context-parallel-size or ROLL's ulysses_size) groups
// consecutive ranks, rank = data_index * cp + cp_index, independently of the fsdp/ddp layout: the
// ranks of a cp group read the same samples (one data-parallel rank) and each computes a slice
// of every sequence. Parameters are sharded over fsdp as without it (ROLL's 8 ranks with
// ulysses_size 2, fsdp_size 4: ddp 2 x fsdp 4, four cp pairs).
#pragma once

#include <memory>
#include <string>

#include "parallel/group.h"
#include "parallel/parallel_dims.h"

namespace megacpp::parallel {

class DistributedRuntime;

class DeviceMesh {
 public:
  // The groups of `dims` over the runtime's first dims.world ranks (all of them, or the trainer's
  // ranks when rollout workers take the rest: Note [Weight sync over a process group]).
  // Collective: every rank of the runtime must call it; a rank beyond dims.world gets a mesh it
  // is no member of (contains_me() false).
  static DeviceMesh build(DistributedRuntime& runtime, const ParallelDims& dims);
  // The same with the dimensions resolved against the runtime's world (ParallelDims::resolve).
  static DeviceMesh build(DistributedRuntime& runtime, int fsdp_size, int cp_size = 1);

  // A mesh of one process, for running without distribution.
  static DeviceMesh single();

  const Group& fsdp() const { return fsdp_; }  // shards parameters
  const Group& ddp() const { return ddp_; }    // replicates shards (size 1 unless HSDP)
  const Group& cp() const { return cp_; }            // splits each sequence (Ulysses; size 1 without)
  const Group& tp() const { return tp_; }            // splits each layer's weights (size 1 without)
  const ParallelDims& dims() const { return dims_; }
  int world_size() const { return dims_.world; }
  // Ranks that read different samples; gradients summed over all ranks are divided by it.
  int data_parallel_size() const { return dims_.data_parallel_size(); }
  int data_parallel_rank() const { return (ddp_.rank * fsdp_.size() + fsdp_.rank) / cp_.size(); }
  bool is_hsdp() const { return dims_.is_hsdp(); }
  bool contains_me() const { return fsdp_.contains_me(); }
  std::string describe() const { return dims_.describe(); }

 private:
  ParallelDims dims_;
  Group fsdp_;
  Group ddp_;
  Group cp_;
  Group tp_;
};

}  // namespace megacpp::parallel
