#include "parallel/fsdp/shard_layout.h"

#include <algorithm>
#include <stdexcept>

namespace megacpp::parallel::fsdp {

ShardLayout compute_shard_layout(const std::vector<int64_t>& shape, int world) {
  if (shape.empty()) throw std::invalid_argument("cannot shard a 0-dimensional tensor on dim 0");
  if (world < 1) throw std::invalid_argument("shard count must be >= 1");
  ShardLayout layout;
  layout.shape = shape;
  layout.world = world;
  layout.rows = shape[0];
  for (size_t i = 1; i < shape.size(); ++i) layout.row_numel *= shape[i];
  layout.chunk_rows = (layout.rows + world - 1) / world;
  return layout;
}

int64_t ShardLayout::first_row(int rank) const { return std::min(rows, rank * chunk_rows); }

int64_t ShardLayout::rows_on(int rank) const {
  return std::clamp<int64_t>(rows - rank * chunk_rows, 0, chunk_rows);
}

std::vector<int64_t> ShardLayout::shard_shape(int rank) const {
  std::vector<int64_t> out = shape;
  out[0] = rows_on(rank);
  return out;
}

}  // namespace megacpp::parallel::fsdp
