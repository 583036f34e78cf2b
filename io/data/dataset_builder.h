// From Megatron's data flags to the train / validation / test sample sources:
// `--data-path` (one prefix, or a weighted blend "0.7 A 0.3 B"), `--split 969,30,1`, and the
// number of samples each split must provide.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "io/data/sample_index_cache.h"
#include "io/data/sample_source.h"

namespace megacpp::io::data {

struct DataBlend {
  std::vector<std::string> paths;
  std::vector<double> weights;  // one per path, > 0
};

// Megatron's --data-path words: "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ...". Throws
// std::invalid_argument naming --data-path.
DataBlend parse_data_blend(const std::vector<std::string>& words);

// "969,30,1" (or "98/2/0", one to three numbers) → fractions of train, validation, test.
// Throws std::invalid_argument naming --split.
std::array<double, 3> parse_split(const std::string& text);

// Megatron's split arithmetic over `count` sequences: boundaries b0 = 0 <= b1 <= b2 <= b3 = count,
// split s being sequences [b_s, b_s+1).
std::array<int64_t, 4> split_boundaries(const std::array<double, 3>& split, int64_t count);

enum Split { kTrain = 0, kValid = 1, kTest = 2 };
inline const char* split_name(int split) { return split == kTrain ? "train" : split == kValid ? "validation" : "test"; }

struct DatasetSplits {
  std::array<std::shared_ptr<const SampleSource>, 3> splits;  // null where no samples were asked
  std::vector<std::string> summary;                            // one line per dataset, for the start-up log
};

// Opens every dataset of the blend, cuts each into the three splits by sequence, and builds
// GPT samples of seq_length + 1 tokens (blended when there are several paths). A split that is
// asked for samples but gets no sequences is an error naming --split. `cache`: --data-cache-path.
DatasetSplits build_gpt_datasets(const DataBlend& blend, const std::array<double, 3>& split,
                                 const std::array<int64_t, 3>& num_samples, int64_t seq_length, uint64_t seed,
                                 const SampleIndexCache& cache = {});

}  // namespace megacpp::io::data
