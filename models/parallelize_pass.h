// One pass of parallelize (Note [Parallelize] in models/parallelize.h) and the sharding plan the
// sharding passes share. Apart from parallelize.h so that FSDP2Mixin, which a family overrides
// to change the list of passes, can name them.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "parallel/device_mesh.h"
#include "parallel/fsdp/options.h"

namespace megacpp::models {

struct Parallelization;  // models/parallelize.h: the model, the mesh, the settings, the plan

// Which modules are sharded and recomputed, and how: filled by the sharding_plan pass from the
// model's final module tree, read by the passes after it.
struct ShardingPlan {
  const parallel::DeviceMesh* mesh = nullptr;
  parallel::fsdp::FullyShardOptions options;   // for every fully_shard call
  std::vector<std::string> wrap_paths;         // post-order
  std::vector<std::string> recompute_paths;    // forward order
  // Wrapped modules whose cast_forward_inputs is not options' (by their class).
  std::map<std::string, bool> cast_forward_inputs_at;
};

struct ParallelizePass {
  std::string name;
  // Does its work, or nothing when the settings do not ask for it; returns whether it did.
  std::function<bool(Parallelization&)> run;
};

// Puts `pass` right before the pass named `before`. Throws std::logic_error when there is none.
void insert_pass_before(std::vector<ParallelizePass>& passes, const std::string& before, ParallelizePass pass);

}  // namespace megacpp::models
