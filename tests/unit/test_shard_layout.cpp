#include <gtest/gtest.h>

#include <stdexcept>

#include "parallel/fsdp/shard_layout.h"

namespace megacpp::parallel::fsdp {
namespace {

std::vector<int64_t> rows(const ShardLayout& layout) {
  std::vector<int64_t> out;
  for (int r = 0; r < layout.world; ++r) out.push_back(layout.rows_on(r));
  return out;
}

TEST(ShardLayout, FollowsTorchChunk) {
  // torch.chunk(10 rows, 4) -> 3, 3, 3, 1
  auto a = compute_shard_layout({10, 7}, 4);
  EXPECT_EQ(rows(a), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(a.chunk_rows, 3);
  EXPECT_EQ(a.padded_numel(), 21);
  EXPECT_EQ(a.first_row(3), 9);
  EXPECT_EQ(a.shard_shape(3), (std::vector<int64_t>{1, 7}));
  // torch.chunk(5, 4) -> 2, 2, 1 and an empty fourth shard
  EXPECT_EQ(rows(compute_shard_layout({5}, 4)), (std::vector<int64_t>{2, 2, 1, 0}));
  // fewer rows than shards
  auto tiny = compute_shard_layout({2, 3}, 4);
  EXPECT_EQ(rows(tiny), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(tiny.first_row(3), 2);
  // divisible
  EXPECT_EQ(rows(compute_shard_layout({8}, 4)), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(rows(compute_shard_layout({3, 2, 2}, 1)), (std::vector<int64_t>{3}));
}

TEST(ShardLayout, RejectsScalarsAndEmptyWorlds) {
  EXPECT_THROW(compute_shard_layout({}, 2), std::invalid_argument);
  EXPECT_THROW(compute_shard_layout({4}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace megacpp::parallel::fsdp
