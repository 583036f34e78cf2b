// Packing short samples into full-length ones (megacpp-preprocess --pack), as LLaMA-Factory's
// and MindSpeed-LLM's greedy knapsack packs them: each pack is filled with the longest samples
// left that still fit, so few packs are needed and little of each is padding.
#pragma once

#include <cstdint>
#include <vector>

namespace megacpp::io::data {

// Groups the samples of `lengths` into packs of at most `capacity` tokens each: one list of
// sample indices per pack, packs in the order made, a pack's samples longest first (ties in
// input order). Every index appears once. Throws std::invalid_argument naming a sample longer
// than `capacity`.
std::vector<std::vector<int64_t>> pack_samples(const std::vector<int64_t>& lengths, int64_t capacity);

}  // namespace megacpp::io::data
