#include "rl/rollout_groups.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/distributed_runtime.h"

namespace megacpp::rl {

RolloutGroups split_rollout_ranks(parallel::DistributedRuntime& runtime, int trainer_ranks, std::chrono::milliseconds sync_timeout) {
  const int world = runtime.world_size();
  if (trainer_ranks < 1 || trainer_ranks >= world) {
    throw std::invalid_argument(std::to_string(trainer_ranks) + " trainer rank(s) in a world of " + std::to_string(world) +
                                ": the trainer needs at least one rank and the rollout workers at least one of the rest");
  }
  std::vector<int> trainers, workers, sync{0};
  for (int r = 0; r < world; ++r) (r < trainer_ranks ? trainers : workers).push_back(r);
  sync.insert(sync.end(), workers.begin(), workers.end());
  RolloutGroups groups;
  groups.all = runtime.world();
  groups.trainers = runtime.new_group(trainers);
  groups.workers = runtime.new_group(workers);
  groups.sync = runtime.new_group(sync, sync_timeout);
  return groups;
}

}  // namespace megacpp::rl
