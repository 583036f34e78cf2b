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

ParallelDims ParallelDims::resolve(int world, int shard, int cp, const std::string& shard_name, const std::string& cp_name,
                                   int tp, const std::string& tp_name) {
  if (world < 1) throw std::invalid_argument("a world of " + std::to_string(world) + " ranks");
  require_divides(tp, world, tp_name, "each layer's weights are split over that many consecutive ranks");
  if (tp > 1 && cp > 1) {
    throw std::invalid_argument(tp_name + "=" + std::to_string(tp) + " with " + cp_name + "=" + std::to_string(cp) +
                                ": tensor parallelism beside Ulysses is not supported yet");
  }
  ParallelDims dims;
  dims.world = world;
  dims.tp = tp;
  const int data_ranks = world / tp;
  dims.dp_shard = shard <= 1 || shard >= data_ranks ? data_ranks : shard;
  require_divides(dims.dp_shard, data_ranks, shard_name,
                  tp > 1 ? "use a divisor of the world size over " + tp_name + " (HSDP) or -1 for full sharding"
                         : "use a divisor of the world size (HSDP) or -1 for full sharding");
  dims.dp_replicate = data_ranks / dims.dp_shard;
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
