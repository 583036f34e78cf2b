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
  return mesh;
}

DeviceMesh DeviceMesh::build(DistributedRuntime& runtime, int fsdp_size) {
  const int world = runtime.world_size();
  const int fsdp = resolve_fsdp_size(fsdp_size, world, "sharding_size");
  const int ddp = world / fsdp;
  DeviceMesh mesh;
  if (ddp == 1) {
    mesh.fsdp_ = runtime.world();
    mesh.ddp_ = Group::single(runtime.rank());
    return mesh;
  }
  // Every rank creates every group in the same order; each keeps the ones it belongs to.
  for (int d = 0; d < ddp; ++d) {
    std::vector<int> ranks;
    for (int f = 0; f < fsdp; ++f) ranks.push_back(d * fsdp + f);
    Group group = runtime.new_group(ranks);
    if (group.contains_me()) mesh.fsdp_ = group;
  }
  for (int f = 0; f < fsdp; ++f) {
    std::vector<int> ranks;
    for (int d = 0; d < ddp; ++d) ranks.push_back(d * fsdp + f);
    Group group = runtime.new_group(ranks);
    if (group.contains_me()) mesh.ddp_ = group;
  }
  return mesh;
}

std::string DeviceMesh::describe() const {
  if (is_hsdp()) {
    return "HSDP (ddp=" + std::to_string(ddp_.size()) + ", fsdp=" + std::to_string(fsdp_.size()) + ")";
  }
  return "FSDP (fsdp=" + std::to_string(fsdp_.size()) + ")";
}

}  // namespace megacpp::parallel
