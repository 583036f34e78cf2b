// What the training loop reads: a fixed-length sample of tokens by index. GPT datasets,
// blends of them and the mock data all look like this, so the loop is the same for each.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace megacpp::io::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Number of samples; sample(i) is valid for 0 <= i < size().
  virtual int64_t size() const = 0;
  // Writes the sample_length() tokens of sample `index` to `out`.
  virtual void sample(int64_t index, int64_t* out) const = 0;
  virtual int64_t sample_length() const = 0;
  // The tokens of sample `index` before its padding, when a micro-batch may be cut to its longest
  // sample (--variable-seq-lengths); sample_length() otherwise.
  virtual int64_t unpadded_length(int64_t index) const { return sample_length(); }

  // Image-text sources (ImageTextDataset) also say which labels count and carry images; token
  // sources score every label and have none (these defaults).
  virtual bool has_images() const { return false; }
  // Whether sample_extras gives a loss mask (image-text and instruction data); else every label
  // is scored.
  virtual bool has_loss_mask() const { return has_images(); }
  // [channels, height, width] of each image.
  virtual std::vector<int64_t> image_shape() const { return {}; }
  // Writes sample_length() - 1 flags to `loss_mask` (1: label i, token i + 1, is scored) and
  // appends the pixels of the sample's images ([channels, size, size] floats each) to `pixels`.
  virtual void sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const {
    std::fill(loss_mask, loss_mask + sample_length() - 1, uint8_t{1});
  }
  // Writes which document each of the sample's sample_length() - 1 input tokens belongs to (equal
  // ids within one) and returns true, for a source that records it (instruction data: its
  // conversations, packed or one per sample); false: documents end at the end-of-document token.
  virtual bool sample_documents(int64_t /*index*/, int64_t* /*out*/) const { return false; }
};

}  // namespace megacpp::io::data
