#include "training/data/cyclic_samples.h"

#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace megacpp::training::data {

CyclicSamples::CyclicSamples(std::shared_ptr<const io::data::SampleSource> base, int64_t samples, int64_t micro_batch_size)
    : base_(std::move(base)), size_(samples), per_epoch_(base_->size() / micro_batch_size * micro_batch_size) {
  if (per_epoch_ == 0) {
    throw std::invalid_argument("--dataloader-type cyclic: the training split has " + std::to_string(base_->size()) +
                                " samples, fewer than one micro-batch");
  }
}

const std::vector<int64_t>& CyclicSamples::order(int64_t epoch) const {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  if (orders_.size() >= 2) orders_.erase(orders_.begin());  // batches only move forward
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(epoch));
  const at::Tensor permutation = torch::randperm(per_epoch_, generator, torch::kLong);
  const int64_t* values = permutation.data_ptr<int64_t>();
  return orders_.emplace(epoch, std::vector<int64_t>(values, values + per_epoch_)).first->second;
}

int64_t CyclicSamples::drawn(int64_t index) const {
  if (index < 0 || index >= size_) throw std::out_of_range("cyclic sample " + std::to_string(index) + " of " + std::to_string(size_));
  std::lock_guard<std::mutex> lock(mutex_);
  return order(index / per_epoch_)[static_cast<size_t>(index % per_epoch_)];
}

void CyclicSamples::sample(int64_t index, int64_t* out) const { base_->sample(drawn(index), out); }

void CyclicSamples::sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const {
  base_->sample_extras(drawn(index), loss_mask, pixels);
}

}  // namespace megacpp::training::data
