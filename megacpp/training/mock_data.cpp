#include "megacpp/training/mock_data.h"

#include <algorithm>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace megacpp::training {

at::Tensor MockDataset::sample(int64_t index) const {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ * 6364136223846793005ull + static_cast<uint64_t>(index) + 1);
  const int64_t max_stride = std::max<int64_t>(1, std::min<int64_t>(7, vocab_size_ - 1));
  const int64_t start = torch::randint(vocab_size_, {1}, generator).item<int64_t>();
  const int64_t stride = 1 + torch::randint(max_stride, {1}, generator).item<int64_t>();
  return (torch::arange(seq_length_ + 1, torch::kLong) * stride + start).remainder(vocab_size_);
}

at::Tensor MockDataset::batch(int64_t first, int64_t count) const {
  std::vector<at::Tensor> samples;
  for (int64_t i = 0; i < count; ++i) samples.push_back(sample(first + i));
  return torch::stack(samples);
}

}  // namespace megacpp::training
