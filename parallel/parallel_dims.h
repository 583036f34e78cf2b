// How the world's ranks are divided (torchtitan's ParallelDims), resolved and checked once,
// before any process group exists; DeviceMesh::build makes the groups from it.
//
// dp_replicate x dp_shard = world: the ranks that hold parameters, HSDP's replicas of FSDP's
// shards (dp_replicate 1: plain FSDP). Independently, groups of `cp` consecutive ranks split each
// sequence (Ulysses context parallelism); the world / cp data-parallel ranks read different
// samples. Tensor parallelism is the innermost dimension, as Megatron and torchtitan order it:
// rank = (replica * dp_shard + shard) * tp + tp_index, so dp_replicate x dp_shard x tp = world
// and the ranks of one TP group are consecutive (--tensor-model-parallel-size).
#pragma once

#include <string>

namespace megacpp::parallel {

struct ParallelDims {
  int world = 1;
  int dp_replicate = 1;  // HSDP's replicas (the mesh's ddp dimension)
  int dp_shard = 1;      // the ranks one parameter is sharded over (fsdp)
  int cp = 1;            // the ranks one sequence is split over (Ulysses)
  int tp = 1;            // the ranks one layer's weights are split over (tensor parallelism)

  // `shard` <= 1 or >= world / tp: full sharding over the data-parallel ranks; otherwise HSDP
  // with dp_replicate = world / tp / shard. Throws when `tp` or `cp` does not divide the world or
  // `shard` the world / tp, naming them as `tp_name`, `shard_name` and `cp_name` (a YAML key, a
  // flag, "in FILE"), and for both cp and tp above 1 (not supported).
  static ParallelDims resolve(int world, int shard, int cp = 1, const std::string& shard_name = "sharding_size",
                              const std::string& cp_name = "ulysses_size", int tp = 1,
                              const std::string& tp_name = "--tensor-model-parallel-size");

  int data_parallel_size() const { return world / (cp * tp); }  // ranks that read different samples
  bool is_hsdp() const { return dp_replicate > 1; }
  std::string describe() const;  // e.g. "HSDP (ddp=2, fsdp=2), Ulysses 2 (data-parallel 2)"
};

}  // namespace megacpp::parallel
