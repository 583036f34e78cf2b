#include "parallel/parallel_dims.h"

#include <stdexcept>

namespace megacpp::parallel {
namespace {

void require_divides(int size, int world, const std::string& name, const std::string& what) {
  if (size >= 1 && world % size == 0) return;
  throw std::invalid_argument(name + "=" + std::to_string(size) + " does not divide the world size " + std::to_string(world) +
                              "; " + what);
}

}  // namespace

ParallelDims ParallelDims::resolve(int world, int shard, int cp, const std::string& shard_name, const std::string& cp_name) {
  if (world < 1) throw std::invalid_argument("a world of " + std::to_string(world) + " ranks");
  ParallelDims dims;
  dims.world = world;
  dims.dp_shard = shard <= 1 || shard >= world ? world : shard;
  require_divides(dims.dp_shard, world, shard_name, "use a divisor of the world size (HSDP) or -1 for full sharding");
  dims.dp_replicate = world / dims.dp_shard;
  require_divides(cp, world, cp_name, "each sequence is split over that many consecutive ranks");
  dims.cp = cp;
  return dims;
}

std::string ParallelDims::describe() const {
  std::string text = is_hsdp() ? "HSDP (ddp=" + std::to_string(dp_replicate) + ", fsdp=" + std::to_string(dp_shard) + ")"
                               : "FSDP (fsdp=" + std::to_string(dp_shard) + ")";
  if (cp > 1) text += ", Ulysses " + std::to_string(cp) + " (data-parallel " + std::to_string(data_parallel_size()) + ")";
  if (tp > 1) text += ", TP " + std::to_string(tp) + " (data-parallel " + std::to_string(data_parallel_size()) + ")";
  return text;
}

}  // namespace megacpp::parallel
