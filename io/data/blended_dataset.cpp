#include "io/data/blended_dataset.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace megacpp::io::data {

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> datasets, std::vector<double> weights,
                               int64_t size)
    : datasets_(std::move(datasets)) {
  if (datasets_.empty() || datasets_.size() != weights.size() || datasets_.size() > UINT16_MAX) {
    throw std::invalid_argument("a blend needs one weight per dataset (at most 65535 datasets)");
  }
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights) w /= total;
  for (const auto& d : datasets_) {
    if (d->sample_length() != datasets_.front()->sample_length()) throw std::invalid_argument("blended datasets differ in sample length");
  }
  std::vector<int64_t> taken(datasets_.size(), 0);
  dataset_index_.resize(static_cast<size_t>(size));
  dataset_sample_index_.resize(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double position = std::max<double>(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * position - static_cast<double>(taken[0]);
    for (size_t d = 1; d < datasets_.size(); ++d) {
      const double error = weights[d] * position - static_cast<double>(taken[d]);
      if (error > best_error) best = d, best_error = error;
    }
    dataset_index_[static_cast<size_t>(i)] = static_cast<uint16_t>(best);
    dataset_sample_index_[static_cast<size_t>(i)] = taken[best]++;
  }
  for (size_t d = 0; d < datasets_.size(); ++d) {
    if (taken[d] > datasets_[d]->size()) {
      throw std::invalid_argument("blended dataset " + std::to_string(d) + " has " + std::to_string(datasets_[d]->size()) +
                                  " samples but its weight asks for " + std::to_string(taken[d]));
    }
  }
}

void BlendedDataset::sample(int64_t index, int64_t* out) const {
  if (index < 0 || index >= size()) throw std::out_of_range("blended sample " + std::to_string(index) + " of " + std::to_string(size()));
  const auto i = static_cast<size_t>(index);
  datasets_[dataset_index_[i]]->sample(dataset_sample_index_[i], out);
}

}  // namespace megacpp::io::data
