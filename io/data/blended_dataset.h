// Megatron's BlendedDataset: samples drawn from several datasets in proportion to weights.
// Sample i goes to the dataset whose share so far lags its weight the most, so any prefix of
// the stream is blended as closely as possible (Megatron's build_blending_indices).
#pragma once

#include <memory>
#include <vector>

#include "io/data/sample_source.h"

namespace megacpp::io::data {

class BlendedDataset final : public SampleSource {
 public:
  // `weights` need not sum to 1. Throws std::invalid_argument if a dataset is too small for
  // its share of `size` samples.
  BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> datasets, std::vector<double> weights, int64_t size);

  int64_t size() const override { return static_cast<int64_t>(dataset_index_.size()); }
  int64_t sample_length() const override { return datasets_.front()->sample_length(); }
  void sample(int64_t index, int64_t* out) const override;

 private:
  std::vector<std::shared_ptr<const SampleSource>> datasets_;
  std::vector<uint16_t> dataset_index_;
  std::vector<int64_t> dataset_sample_index_;
};

}  // namespace megacpp::io::data
