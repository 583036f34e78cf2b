// The shard math, in one place for the engine and the checkpoint code alike.
// A parameter of shape [dim0, *rest] is split on dim 0 as torch.chunk(world) does: every
// chunk has ceil(dim0 / world) rows except the tail, and ranks past the end get 0 rows.
// Each rank's shard is padded to the rows of chunk 0, so padding only ever sits at the end
// of the gathered tensor.
#pragma once

#include <cstdint>
#include <vector>

namespace megacpp::parallel::fsdp {

struct ShardLayout {
  std::vector<int64_t> shape;  // the full parameter's shape
  int world = 1;               // number of shards
  int64_t rows = 0;            // dim0
  int64_t row_numel = 1;       // product of shape[1:]
  int64_t chunk_rows = 0;      // rows of chunk 0 = padded rows of every shard

  int64_t rows_on(int rank) const;      // real rows of `rank`'s shard, 0..chunk_rows
  int64_t first_row(int rank) const;    // global row where `rank`'s shard starts
  int64_t padded_numel() const { return chunk_rows * row_numel; }  // per shard
  std::vector<int64_t> shard_shape(int rank) const;  // [rows_on(rank), *rest]
};

// Throws std::invalid_argument for a 0-dimensional shape or a world < 1.
ShardLayout compute_shard_layout(const std::vector<int64_t>& shape, int world);

}  // namespace megacpp::parallel::fsdp
