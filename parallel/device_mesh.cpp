#include "parallel/device_mesh.h"

#include <stdexcept>
#include <vector>

#include "parallel/distributed_runtime.h"

namespace megacpp::parallel {

DeviceMesh DeviceMesh::single() {
  DeviceMesh mesh;
  mesh.fsdp_ = Group::single(0);
  mesh.ddp_ = Group::single(0);
  mesh.cp_ = Group::single(0);
  mesh.tp_ = Group::single(0);
  return mesh;
}

namespace {

// Every rank creates every group over the first `ranks` ranks in the same order; each keeps the one
// it belongs to (none beyond them: rank -1).
Group consecutive_groups(DistributedRuntime& runtime, int ranks, int group_size) {
  Group mine;
  mine.rank = -1;
  for (int first = 0; first < ranks; first += group_size) {
    std::vector<int> ranks;
    for (int r = first; r < first + group_size; ++r) ranks.push_back(r);
    Group group = runtime.new_group(ranks);
    if (group.contains_me()) mine = group;
  }
  return mine;
}

}  // namespace

DeviceMesh DeviceMesh::build(DistributedRuntime& runtime, const ParallelDims& dims) {
  if (dims.world > runtime.world_size()) {
    throw std::invalid_argument("a mesh for " + std::to_string(dims.world) + " ranks (" + dims.describe() + ") on a world of " +
                                std::to_string(runtime.world_size()));
  }
  if (dims.tp > 1 && dims.cp > 1) throw std::invalid_argument("a mesh with both Ulysses (" + std::to_string(dims.cp) + ") and TP (" +
                                                              std::to_string(dims.tp) + "): not supported yet");
  DeviceMesh mesh;
  mesh.dims_ = dims;
  const bool member = runtime.rank() < dims.world;
  Group outside;
  outside.rank = -1;
  const Group single = member ? Group::single(runtime.rank()) : outside;
  // A group of its own even when it spans the world: its all-to-alls never queue behind the
  // reduce-scatters FSDP leaves in flight.
  mesh.cp_ = dims.cp == 1 ? single : consecutive_groups(runtime, dims.world, dims.cp);
  mesh.tp_ = dims.tp == 1 ? single : consecutive_groups(runtime, dims.world, dims.tp);
  mesh.ddp_ = single;
  if (!dims.is_hsdp() && dims.tp == 1) {
    mesh.fsdp_ = dims.world == runtime.world_size() ? runtime.world() : consecutive_groups(runtime, dims.world, dims.world);
    return mesh;
  }
  // rank = (replica * dp_shard + shard) * tp + tp_index: one fsdp group per (replica, tp_index),
  // one ddp group per (shard, tp_index).
  for (int r = 0; r < dims.dp_replicate; ++r) {
    for (int t = 0; t < dims.tp; ++t) {
      std::vector<int> ranks;
      for (int f = 0; f < dims.dp_shard; ++f) ranks.push_back((r * dims.dp_shard + f) * dims.tp + t);
      Group group = runtime.new_group(ranks);
      if (group.contains_me()) mesh.fsdp_ = group;
    }
  }
  if (!member) mesh.fsdp_ = outside;
  if (!dims.is_hsdp()) return mesh;
  for (int f = 0; f < dims.dp_shard; ++f) {
    for (int t = 0; t < dims.tp; ++t) {
      std::vector<int> ranks;
      for (int r = 0; r < dims.dp_replicate; ++r) ranks.push_back((r * dims.dp_shard + f) * dims.tp + t);
      Group group = runtime.new_group(ranks);
      if (group.contains_me()) mesh.ddp_ = group;
    }
  }
  return mesh;
}

DeviceMesh DeviceMesh::build(DistributedRuntime& runtime, int fsdp_size, int cp_size) {
  return build(runtime, ParallelDims::resolve(runtime.world_size(), fsdp_size, cp_size));
}

}  // namespace megacpp::parallel
