// What the training loop reads: a fixed-length sample of tokens by index. GPT datasets,
// blends of them and the mock data all look like this, so the loop is the same for each.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Number of samples; sample(i) is valid for 0 <= i < size().
  virtual int64_t size() const = 0;
  // Writes the sample_length() tokens of sample `index` to `out`.
  virtual void sample(int64_t index, int64_t* out) const = 0;
  virtual int64_t sample_length() const = 0;
};

}  // namespace megacpp::data
