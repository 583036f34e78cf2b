// --data-cache-path: the GPT dataset's three sample indices kept on disk, as Megatron keeps them,
// so a later run with the same data, split, sample count, sequence length and seed reads them
// instead of building them again. Per dataset split, in the cache directory:
//   <hash>-GPTDataset-description.txt   what the indices were built from (compared on reading)
//   <hash>-GPTDataset-document_index.npy  int64 [documents]
//   <hash>-GPTDataset-sample_index.npy    int64 [samples + 1, 2]
//   <hash>-GPTDataset-shuffle_index.npy   int64 [samples]
// (NumPy's .npy format, which numpy.load reads). The hash names the description; a file that
// is missing, unreadable or of another description means the indices are built anew.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megacpp::io::data {

struct GptSampleIndices {
  std::vector<int64_t> document_index;                   // sequence numbers
  std::vector<std::pair<int64_t, int64_t>> sample_index;  // (document index position, token offset)
  std::vector<int64_t> shuffle_index;
};

// Where the indices are kept, and whether this process writes them (one rank does: the others
// would write the same files at the same time).
struct SampleIndexCache {
  std::string dir;  // empty: no cache
  bool writer = false;
};

// The indices cached for `description` in `cache.dir`, or nullopt (with the reason in the log
// when files exist but do not serve).
std::optional<GptSampleIndices> read_cached_indices(const SampleIndexCache& cache, const std::string& description);

// Writes the indices (each file atomically, the description last) when `cache.writer`.
void write_cached_indices(const SampleIndexCache& cache, const std::string& description, const GptSampleIndices& indices);

}  // namespace megacpp::io::data
