// --dataloader-type cyclic draws each pass's order as Megatron does: torch.randperm with a
// generator seeded with the pass's number, over the whole micro-batches of the split.
#include <gtest/gtest.h>

#include <sstream>

#include "training/data/cyclic_samples.h"
#include "tests/support/command.h"

namespace megacpp {
namespace {

// Sample i is the one token i.
class Numbered final : public io::data::SampleSource {
 public:
  explicit Numbered(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  int64_t sample_length() const override { return 1; }
  void sample(int64_t index, int64_t* out) const override { *out = index; }

 private:
  int64_t n_;
};

std::vector<int64_t> python_randperm(int64_t n, int64_t seed) {
  const auto result = testing::run_command("/usr/bin/python3 -c 'import torch; g = torch.Generator(); g.manual_seed(" +
                                           std::to_string(seed) + "); print(*torch.randperm(" + std::to_string(n) +
                                           ", generator=g).tolist())'");
  std::istringstream words(result.output);
  std::vector<int64_t> values;
  for (int64_t v; words >> v;) values.push_back(v);
  EXPECT_EQ(static_cast<int64_t>(values.size()), n) << result.output;
  return values;
}

TEST(CyclicSamples, EachPassIsTorchRandpermSeededWithItsNumber) {
  // 23 samples, micro-batches of 2: passes of 22, the last sample never drawn (as Megatron).
  const training::data::CyclicSamples cyclic(std::make_shared<Numbered>(23), 50, 2);
  ASSERT_EQ(cyclic.size(), 50);
  std::vector<int64_t> drawn(50);
  for (int64_t i = 0; i < 50; ++i) cyclic.sample(i, &drawn[static_cast<size_t>(i)]);
  const std::vector<int64_t> first = python_randperm(22, 0), second = python_randperm(22, 1), third = python_randperm(22, 2);
  EXPECT_EQ(std::vector<int64_t>(drawn.begin(), drawn.begin() + 22), first);
  EXPECT_EQ(std::vector<int64_t>(drawn.begin() + 22, drawn.begin() + 44), second);
  EXPECT_EQ(std::vector<int64_t>(drawn.begin() + 44, drawn.end()), std::vector<int64_t>(third.begin(), third.begin() + 6));
  int64_t out = 0;
  EXPECT_THROW(cyclic.sample(50, &out), std::out_of_range);
  EXPECT_THROW(training::data::CyclicSamples(std::make_shared<Numbered>(1), 4, 2), std::invalid_argument);
}

}  // namespace
}  // namespace megacpp
