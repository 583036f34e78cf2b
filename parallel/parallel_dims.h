// How the world's ranks are divided (torchtitan's ParallelDims), resolved and checked once,
// before any process group exists; DeviceMesh::build makes the groups from it.
//
// dp_replicate x dp_shard = world: the ranks that hold parameters, HSDP's replicas of FSDP's
// shards (dp_replicate 1: plain FSDP). Independently, groups of `cp` consecutive ranks split each
// sequence (Ulysses context parallelism); the world / cp data-parallel ranks read different
// samples. Tensor parallelism is the innermost dimension, as Megatron and torchtitan order it:
// rank = (replica * dp_shard + shard) * tp + tp_index, so dp_replicate x dp_shard x tp = world
// and the ranks of one TP group are consecutive (no flag sets tp above 1 yet; issue 33).
#pragma once

#include <string>

namespace megacpp::parallel {

struct ParallelDims {
  int world = 1;
  int dp_replicate = 1;  // HSDP's replicas (the mesh's ddp dimension)
  int dp_shard = 1;      // the ranks one parameter is sharded over (fsdp)
  int cp = 1;            // the ranks one sequence is split over (Ulysses)
  int tp = 1;            // the ranks one layer's weights are split over (tensor parallelism)

  // `shard` <= 1 or >= world: full sharding over the world; otherwise HSDP with
  // dp_replicate = world / shard. Throws when `shard` or `cp` does not divide the world, naming
  // them as `shard_name` and `cp_name` (a YAML key, a flag, "in FILE").
  static ParallelDims resolve(int world, int shard, int cp = 1, const std::string& shard_name = "sharding_size",
                              const std::string& cp_name = "ulysses_size");

  int data_parallel_size() const { return world / (cp * tp); }  // ranks that read different samples
  bool is_hsdp() const { return dp_replicate > 1; }
  std::string describe() const;  // e.g. "HSDP (ddp=2, fsdp=2), Ulysses 2 (data-parallel 2)"
};

}  // namespace megacpp::parallel
