// --dataloader-type cyclic: Megatron's MegatronPretrainingRandomSampler. The training samples are
// read in a random order that is drawn anew for every pass over the split (epoch e's order is
// torch.randperm with a generator seeded with e, as Megatron draws it), and the run may go on
// past the split's end, cycling. megacpp draws over the whole split, as Megatron does without
// data sharding, so every world size reads the same samples in each global batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "io/data/sample_source.h"

namespace megacpp::training::data {

class CyclicSamples final : public io::data::SampleSource {
 public:
  // `samples`: how many the run reads. The order is over the whole micro-batches of `base`.
  CyclicSamples(std::shared_ptr<const io::data::SampleSource> base, int64_t samples, int64_t micro_batch_size);

  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return base_->sample_length(); }
  void sample(int64_t index, int64_t* out) const override;  // safe from several threads
  int64_t unpadded_length(int64_t index) const override { return base_->unpadded_length(drawn(index)); }
  bool has_images() const override { return base_->has_images(); }
  bool has_loss_mask() const override { return base_->has_loss_mask(); }
  std::vector<int64_t> image_shape() const override { return base_->image_shape(); }
  void sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const override;
  bool sample_documents(int64_t index, int64_t* out) const override { return base_->sample_documents(drawn(index), out); }

 private:
  int64_t drawn(int64_t index) const;  // the base's sample at `index`
  const std::vector<int64_t>& order(int64_t epoch) const;  // with mutex_ held

  std::shared_ptr<const io::data::SampleSource> base_;
  int64_t size_, per_epoch_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::vector<int64_t>> orders_;  // the last epochs read
};

}  // namespace megacpp::training::data
