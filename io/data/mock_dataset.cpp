#include "io/data/mock_dataset.h"

#include <algorithm>

#include "io/data/random.h"

namespace megacpp::io::data {

void MockDataset::sample(int64_t index, int64_t* out) const {
  SplitMix64 rng(seed_ * 6364136223846793005ull + static_cast<uint64_t>(index) + 1);
  const int64_t max_stride = std::max<int64_t>(1, std::min<int64_t>(7, vocab_size_ - 1));
  const int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
  const int64_t stride = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_stride)));
  for (int64_t i = 0; i < sample_length_; ++i) out[i] = (start + i * stride) % vocab_size_;
}

}  // namespace megacpp::io::data
