// --mock-data: synthetic samples that depend only on the seed and the sample index, so every
// world size sees the same global batch. Each sample is an arithmetic progression modulo the
// vocabulary (random start and stride): easy to learn, so losses fall.
#pragma once

#include "io/data/sample_source.h"

namespace megacpp::io::data {

class MockDataset final : public SampleSource {
 public:
  MockDataset(int64_t vocab_size, int64_t sample_length, uint64_t seed, int64_t size)
      : vocab_size_(vocab_size), sample_length_(sample_length), seed_(seed), size_(size) {}
  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return sample_length_; }
  void sample(int64_t index, int64_t* out) const override;

 private:
  int64_t vocab_size_, sample_length_;
  uint64_t seed_;
  int64_t size_;
};

}  // namespace megacpp::io::data
