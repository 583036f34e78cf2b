// GPT samples, splits and blends: samples are contiguous runs of the shuffled document
// stream, cover it exactly, and depend only on the seed, the data and the split.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "io/data/blended_dataset.h"
#include "io/data/dataset_builder.h"
#include "io/data/gpt_dataset.h"
#include "io/data/indexed_dataset.h"

namespace megacpp::io::data {
namespace {

// Sequence s holds tokens s * 1000 + 0, 1, 2, ...: every token says where it came from.
class InMemoryDataset final : public TokenDataset {
 public:
  explicit InMemoryDataset(std::vector<int64_t> lengths) : lengths_(std::move(lengths)) {
    for (int64_t s = 0; s <= num_sequences(); ++s) documents_.push_back(s);
  }
  int64_t num_sequences() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t sequence_length(int64_t s) const override { return lengths_[static_cast<size_t>(s)]; }
  void read(int64_t s, int64_t offset, int64_t count, int64_t* out) const override {
    ASSERT_LE(offset + count, sequence_length(s));
    for (int64_t i = 0; i < count; ++i) out[i] = s * 1000 + offset + i;
  }
  const std::vector<int64_t>& document_indices() const override { return documents_; }
  TokenDtype dtype() const override { return TokenDtype::kInt32; }
  const std::string& path() const override { return path_; }

 private:
  std::vector<int64_t> lengths_, documents_;
  std::string path_ = "memory";
};

std::vector<int64_t> sample_of(const SampleSource& source, int64_t index) {
  std::vector<int64_t> out(static_cast<size_t>(source.sample_length()));
  source.sample(index, out.data());
  return out;
}

TEST(GPTDataset, SamplesAreContiguousRunsThatCoverEveryEpochOnce) {
  auto data = std::make_shared<InMemoryDataset>(std::vector<int64_t>{5, 17, 1, 9, 30, 2, 11});
  const int64_t seq = 8, tokens_per_epoch = 75;
  GPTDataset dataset(data, 0, data->num_sequences(), 20, seq, 42);
  ASSERT_GE(dataset.size(), 20);
  EXPECT_EQ(dataset.num_epochs(), (20 * seq + 1 + tokens_per_epoch - 1) / tokens_per_epoch);
  std::map<int64_t, int> seen;  // token -> times read as a non-overlap token
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const auto tokens = sample_of(dataset, i);
    ASSERT_EQ(tokens.size(), static_cast<size_t>(seq + 1));
    for (size_t t = 1; t < tokens.size(); ++t) {
      // Within a sequence tokens advance by one; across sequences a new one starts at 0.
      const bool same_sequence = tokens[t] / 1000 == tokens[t - 1] / 1000 && tokens[t] == tokens[t - 1] + 1;
      EXPECT_TRUE(same_sequence || tokens[t] % 1000 == 0) << "sample " << i << " position " << t;
    }
    for (size_t t = 0; t < static_cast<size_t>(seq); ++t) seen[tokens[t]]++;
  }
  // Each epoch's tokens are read exactly once (but for the tail that does not fill a sample).
  int64_t total = 0;
  for (auto& [token, count] : seen) {
    EXPECT_LE(count, dataset.num_epochs()) << token;
    total += count;
  }
  EXPECT_EQ(total, dataset.size() * seq);
  EXPECT_GT(total, dataset.num_epochs() * tokens_per_epoch - seq - 1 - 1);
}

TEST(GPTDataset, DependsOnlyOnSeedDataAndSplit) {
  auto data = std::make_shared<InMemoryDataset>(std::vector<int64_t>(50, 13));
  GPTDataset a(data, 10, 40, 30, 16, 7), b(data, 10, 40, 30, 16, 7), c(data, 10, 40, 30, 16, 8);
  bool differs = false;
  for (int64_t i = 0; i < 30; ++i) {
    EXPECT_EQ(sample_of(a, i), sample_of(b, i));
    differs |= sample_of(a, i) != sample_of(c, i);
    for (int64_t token : sample_of(a, i)) {
      EXPECT_GE(token / 1000, 10);
      EXPECT_LT(token / 1000, 40);
    }
  }
  EXPECT_TRUE(differs) << "the seed changes nothing";
}

TEST(GPTDataset, RefusesARangeTooSmallForOneSample) {
  auto data = std::make_shared<InMemoryDataset>(std::vector<int64_t>{3, 4});
  try {
    GPTDataset(data, 0, 2, 1, 8, 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one sample"), std::string::npos) << e.what();
  }
}

TEST(DatasetBuilder, ParsesSplitAndBlendAsMegatron) {
  const auto split = parse_split("969, 30, 1");
  EXPECT_NEAR(split[0], 0.969, 1e-12);
  EXPECT_NEAR(split[2], 0.001, 1e-12);
  EXPECT_NEAR(parse_split("98/2")[1], 0.02, 1e-12);
  EXPECT_THROW(parse_split("1,2,3,4"), std::invalid_argument);
  EXPECT_NEAR(parse_split("'99,1,0'")[0], 0.99, 1e-12);  // quoted as Megatron's Llama 3 example passes it
  EXPECT_THROW(parse_split("'99,1,0"), std::invalid_argument);
  EXPECT_THROW(parse_split("0,0"), std::invalid_argument);
  const DataBlend blend = parse_data_blend({"0.7", "a", "0.3", "b"});
  EXPECT_EQ(blend.paths, (std::vector<std::string>{"a", "b"}));
  try {
    parse_data_blend({"x", "a", "0.3", "b"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--data-path: weight 'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_data_blend({"0.7", "a", "b"}), std::invalid_argument);
}

TEST(DatasetBuilder, SplitBoundariesRoundHalvesToEvenAsMegatron) {
  // Python: round(0.9 * 25) = 22, round(0.1 * 25) = 2; the shortfall of 1 moves every later
  // boundary: [0, 23, 25, 25].
  EXPECT_EQ(split_boundaries(parse_split("90,10"), 25), (std::array<int64_t, 4>{0, 23, 25, 25}));
  // 969,30,1 of 150: round(145.35) = 145, round(4.5) = 4, round(0.15) = 0 -> [0, 146, 150, 150].
  EXPECT_EQ(split_boundaries(parse_split("969,30,1"), 150), (std::array<int64_t, 4>{0, 146, 150, 150}));
  EXPECT_EQ(split_boundaries(parse_split("98,2,0"), 15221), (std::array<int64_t, 4>{0, 14917, 15221, 15221}));
}

class ConstantSource final : public SampleSource {
 public:
  ConstantSource(int64_t value, int64_t size) : value_(value), size_(size) {}
  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return 2; }
  void sample(int64_t index, int64_t* out) const override {
    out[0] = value_;
    out[1] = index;
  }

 private:
  int64_t value_, size_;
};

TEST(BlendedDataset, EveryPrefixFollowsTheWeights) {
  BlendedDataset blend({std::make_shared<ConstantSource>(0, 1000), std::make_shared<ConstantSource>(1, 1000)}, {0.7, 0.3}, 1000);
  std::array<int64_t, 2> taken{0, 0};
  for (int64_t i = 0; i < 1000; ++i) {
    const auto s = sample_of(blend, i);
    EXPECT_EQ(s[1], taken[static_cast<size_t>(s[0])]++) << "each dataset is read in order";
    if (i >= 9) EXPECT_LE(std::abs(static_cast<double>(taken[0]) - 0.7 * static_cast<double>(i + 1)), 1.0) << i;
  }
  EXPECT_THROW(BlendedDataset({std::make_shared<ConstantSource>(0, 10), std::make_shared<ConstantSource>(1, 10)}, {0.5, 0.5}, 100),
               std::invalid_argument);
}

}  // namespace
}  // namespace megacpp::io::data
