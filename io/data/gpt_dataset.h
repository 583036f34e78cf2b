// Megatron's GPTDataset: samples of seq_length + 1 tokens cut from a range of sequences
// (one split of an indexed dataset), running across document boundaries.
//
// Three indices, built once from the seed, the data, the split and the number of samples asked
// for (which sets the number of epochs) — never from the world size:
//   document index  the split's sequences repeated for as many epochs as the samples need,
//                   shuffled (the last epoch on its own when it is used for < 80%, as Megatron);
//   sample index    for each sample boundary, (position in the document index, token offset);
//   shuffle index   a permutation of the samples.
#pragma once

#include <memory>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/data/sample_index_cache.h"
#include "io/data/sample_source.h"

namespace megacpp::io::data {

class GPTDataset final : public SampleSource {
 public:
  // Samples from sequences [begin, end) of `data`; at least `num_samples` of them (a whole
  // number of epochs is built, as in Megatron). Throws std::invalid_argument if the range
  // holds too few tokens for one sample. With a `cache` directory the indices are read from
  // there when they were built before from the same inputs, and written there otherwise.
  GPTDataset(std::shared_ptr<const TokenDataset> data, int64_t begin, int64_t end, int64_t num_samples,
             int64_t seq_length, uint64_t seed, const SampleIndexCache& cache = {});

  int64_t size() const override { return static_cast<int64_t>(indices_.shuffle_index.size()); }
  int64_t sample_length() const override { return seq_length_ + 1; }
  void sample(int64_t index, int64_t* out) const override;
  int64_t num_epochs() const { return num_epochs_; }
  bool indices_from_cache() const { return from_cache_; }

 private:
  void build_indices(int64_t begin, int64_t end, int64_t num_samples, int64_t tokens_per_epoch, uint64_t seed);

  std::shared_ptr<const TokenDataset> data_;
  int64_t seq_length_;
  int64_t num_epochs_ = 1;
  GptSampleIndices indices_;
  bool from_cache_ = false;
};

}  // namespace megacpp::io::data
