// Deterministic randomness for data indices: the same seed gives the same permutation on every
// machine and library version (std::shuffle and std distributions are implementation-defined).
#pragma once

#include <cstdint>
#include <vector>

namespace megacpp::io::data {

// SplitMix64: a small, well-mixed 64-bit generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), without modulo bias.
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = next(); while (x >= limit);
    return x % bound;
  }

 private:
  uint64_t state_;
};

// Fisher-Yates shuffle of values[begin, end).
template <class T>
void shuffle_range(std::vector<T>& values, size_t begin, size_t end, SplitMix64& rng) {
  for (size_t i = end; i > begin + 1; --i) {
    const size_t j = begin + rng.below(i - begin);
    std::swap(values[i - 1], values[j]);
  }
}

// Records [first, first + count) read pass after pass, each pass in a new order drawn from
// `seed`: the record of each of `size` samples. With `pass_multiple` > 1 each pass is followed
// by records first, first + 1, ... (MindSpeed-LLM's --padded-samples) until the samples so far
// are a multiple of it, so that no global batch of that many holds two passes.
inline std::vector<int64_t> shuffled_passes(int64_t first, int64_t count, int64_t size, uint64_t seed, int64_t pass_multiple = 1) {
  SplitMix64 rng(seed);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(size));
  while (static_cast<int64_t>(order.size()) < size) {
    const size_t begin = order.size();
    for (int64_t r = 0; r < count; ++r) order.push_back(first + r);
    shuffle_range(order, begin, order.size(), rng);
    for (int64_t r = 0; static_cast<int64_t>(order.size()) % pass_multiple != 0; ++r) order.push_back(first + r % count);
  }
  order.resize(static_cast<size_t>(size));
  return order;
}

}  // namespace megacpp::io::data
