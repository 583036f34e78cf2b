// The ranks of a job whose rollout runs apart from the trainer: the trainer takes the first ranks
// (FSDP2 mesh over them: DeviceMesh::build with dims.world = trainer ranks), the rollout workers
// the rest, as ROLL's device_mapping puts actor_train before actor_infer. The weights go from
// trainer rank 0 to the workers over a group of their own (Note [Weight sync over a process group]).
#pragma once

#include <chrono>

#include "parallel/group.h"

namespace megacpp::parallel {
class DistributedRuntime;
}

namespace megacpp::rl {

struct RolloutGroups {
  parallel::Group all;       // every rank: prompts out, responses back (rl/remote_rollout.h)
  parallel::Group trainers;  // ranks [0, trainer ranks)
  parallel::Group workers;   // the rest
  parallel::Group sync;      // trainer rank 0 (group rank 0, the sender) and the workers
  bool is_trainer() const { return trainers.contains_me(); }
  bool is_worker() const { return workers.contains_me(); }
};

// Collective over every rank of `runtime` (same call, same place in the order of group
// creation). `trainer_ranks` is in [1, world); the sync group's collectives fail after
// `sync_timeout`, so a worker that dies mid-sync costs the trainer at most that long. Throws
// std::invalid_argument naming the sizes when no rank is left for a worker.
RolloutGroups split_rollout_ranks(parallel::DistributedRuntime& runtime, int trainer_ranks, std::chrono::milliseconds sync_timeout);

}  // namespace megacpp::rl
