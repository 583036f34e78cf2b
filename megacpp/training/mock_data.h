// --mock-data: synthetic token samples that depend only on the seed and the sample index,
// so every world size sees the same global batch. Each sample is an arithmetic progression
// modulo the vocabulary (random start and stride), which a model can learn.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace megacpp::training {

class MockDataset {
 public:
  MockDataset(int64_t vocab_size, int64_t seq_length, uint64_t seed)
      : vocab_size_(vocab_size), seq_length_(seq_length), seed_(seed) {}

  // tokens [seq_length + 1] int64 of sample `index`.
  at::Tensor sample(int64_t index) const;
  // tokens [count, seq_length + 1] of samples first..first+count-1.
  at::Tensor batch(int64_t first, int64_t count) const;

 private:
  int64_t vocab_size_, seq_length_;
  uint64_t seed_;
};

}  // namespace megacpp::training
