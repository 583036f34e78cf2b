#include "parallel/device_mesh.h"

#include <stdexcept>
#include <vector>

#include "parallel/distributed_runtime.h"

namespace megacpp::parallel {

int resolve_fsdp_size(int requested, int world_size, const std::string& key) {
  if (requested <= 1 || requested >= world_size) return world_size;
  if (world_size % requested != 0) {
    throw std::invalid_argument(key + "=" + std::to_string(requested) +
                                " does not divide the world size " + std::to_string(world_size) +
                                "; use a divisor of the world size (HSDP) or -1 for full sharding");
  }
  return requested;
}

DeviceMesh DeviceMesh::single() {
  DeviceMesh mesh;
  mesh.fsdp_ = Group::single(0);
  mesh.ddp_ = Group::single(0);
  mesh.ulysses_ = Group::single(0);
  return mesh;
}

namespace {

// Every rank creates every group in the same order; each keeps the one it belongs to.
Group consecutive_groups(DistributedRuntime& runtime, int group_size) {
  Group mine;
  for (int first = 0; first < runtime.world_size(); first += group_size) {
    std::vector<int> ranks;
    for (int r = first; r < first + group_size; ++r) ranks.push_back(r);
    Group group = runtime.new_group(ranks);
    if (group.contains_me()) mine = group;
  }
  return mine;
}

}  // namespace

DeviceMesh DeviceMesh::build(DistributedRuntime& runtime, int fsdp_size, int ulysses_size) {
  const int world = runtime.world_size();
  const int fsdp = resolve_fsdp_size(fsdp_size, world, "sharding_size");
  const int ddp = world / fsdp;
  if (ulysses_size < 1 || world % ulysses_size != 0) {
    throw std::invalid_argument("ulysses_size=" + std::to_string(ulysses_size) + " does not divide the world size " +
                                std::to_string(world) + "; each sequence is split over that many consecutive ranks");
  }
  DeviceMesh mesh;
  // A group of its own even when it spans the world: its all-to-alls never queue behind the
  // reduce-scatters FSDP leaves in flight.
  mesh.ulysses_ = ulysses_size == 1 ? Group::single(runtime.rank()) : consecutive_groups(runtime, ulysses_size);
  if (ddp == 1) {
    mesh.fsdp_ = runtime.world();
    mesh.ddp_ = Group::single(runtime.rank());
    return mesh;
  }
  mesh.fsdp_ = consecutive_groups(runtime, fsdp);
  for (int f = 0; f < fsdp; ++f) {
    std::vector<int> ranks;
    for (int d = 0; d < ddp; ++d) ranks.push_back(d * fsdp + f);
    Group group = runtime.new_group(ranks);
    if (group.contains_me()) mesh.ddp_ = group;
  }
  return mesh;
}

std::string DeviceMesh::describe() const {
  std::string text = is_hsdp() ? "HSDP (ddp=" + std::to_string(ddp_.size()) + ", fsdp=" + std::to_string(fsdp_.size()) + ")"
                               : "FSDP (fsdp=" + std::to_string(fsdp_.size()) + ")";
  if (ulysses_.size() > 1) text += ", Ulysses " + std::to_string(ulysses_.size()) + " (data-parallel " + std::to_string(data_parallel_size()) + ")";
  return text;
}

}  // namespace megacpp::parallel
