#include "io/data/gpt_dataset.h"

#include <numeric>
#include <sstream>
#include <stdexcept>

#include "io/data/random.h"
#include "io/serialization/mapped_file_guard.h"

namespace megacpp::io::data {
namespace {

// Samples overlap by one token: the label of a sample's last input token.
constexpr int64_t kExtraToken = 1;

// Whether cached indices only name sequences of [begin, end) and positions of their document
// index (a file damaged in a way its size does not show is rebuilt, not read out of bounds).
bool fits(const GptSampleIndices& indices, int64_t begin, int64_t end) {
  for (int64_t sequence : indices.document_index) {
    if (sequence < begin || sequence >= end) return false;
  }
  for (const auto& [position, offset] : indices.sample_index) {
    if (position < 0 || position >= static_cast<int64_t>(indices.document_index.size()) || offset < 0) return false;
  }
  const int64_t boundaries = static_cast<int64_t>(indices.sample_index.size());
  for (int64_t sample : indices.shuffle_index) {
    if (sample < 0 || sample + 1 >= boundaries) return false;
  }
  return true;
}

}  // namespace

GPTDataset::GPTDataset(std::shared_ptr<const TokenDataset> data, int64_t begin, int64_t end, int64_t num_samples,
                       int64_t seq_length, uint64_t seed, const SampleIndexCache& cache)
    : data_(std::move(data)), seq_length_(seq_length) {
  int64_t tokens_per_epoch = 0;
  for (int64_t s = begin; s < end; ++s) tokens_per_epoch += data_->sequence_length(s);
  if (tokens_per_epoch - kExtraToken < seq_length) {
    throw std::invalid_argument(data_->path() + ": sequences [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") hold " + std::to_string(tokens_per_epoch) + " tokens, fewer than one sample of " +
                                std::to_string(seq_length + kExtraToken) + " (use more data or another --split)");
  }
  const int64_t tokens_needed = num_samples * seq_length + kExtraToken;
  num_epochs_ = std::max<int64_t>(1, (tokens_needed + tokens_per_epoch - 1) / tokens_per_epoch);
  std::ostringstream description;  // everything the indices depend on
  description << "{\"class\": \"GPTDataset\", \"index_version\": 1, \"dataset_path\": \"" << data_->path()
              << "\", \"sequences\": " << data_->num_sequences() << ", \"tokens\": " << data_->num_tokens()
              << ", \"begin\": " << begin << ", \"end\": " << end << ", \"num_samples\": " << num_samples
              << ", \"sequence_length\": " << seq_length << ", \"random_seed\": " << seed << "}\n";
  if (auto cached = read_cached_indices(cache, description.str()); cached && fits(*cached, begin, end)) {
    indices_ = std::move(*cached);
    from_cache_ = true;
    return;
  }
  build_indices(begin, end, num_samples, tokens_per_epoch, seed);
  write_cached_indices(cache, description.str(), indices_);
}

void GPTDataset::build_indices(int64_t begin, int64_t end, int64_t num_samples, int64_t tokens_per_epoch, uint64_t seed) {
  const int64_t seq_length = seq_length_;
  auto& document_index = indices_.document_index;
  auto& sample_index = indices_.sample_index;
  auto& shuffle_index = indices_.shuffle_index;

  // Megatron shuffles a nearly unused last epoch separately, so that its few samples do not
  // all come from the start of a reshuffled whole.
  bool separate_final_epoch = false;
  int64_t samples_before_final = 0;
  if (num_epochs_ > 1) {
    samples_before_final = ((num_epochs_ - 1) * tokens_per_epoch - kExtraToken) / seq_length;
    const int64_t from_final = num_samples - samples_before_final;
    const int64_t per_epoch = (tokens_per_epoch - kExtraToken) / seq_length;
    separate_final_epoch = from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }

  SplitMix64 rng(seed);
  const int64_t docs = end - begin;
  document_index.resize(static_cast<size_t>(num_epochs_ * docs));
  for (int64_t e = 0; e < num_epochs_; ++e) std::iota(document_index.begin() + e * docs, document_index.begin() + (e + 1) * docs, begin);
  const size_t shuffled_together = separate_final_epoch ? static_cast<size_t>((num_epochs_ - 1) * docs) : document_index.size();
  shuffle_range(document_index, 0, shuffled_together, rng);
  shuffle_range(document_index, shuffled_together, document_index.size(), rng);

  // Walk the document index seq_length tokens at a time (each sample also reads the next
  // sample's first token).
  const int64_t total_samples = (num_epochs_ * tokens_per_epoch - kExtraToken) / seq_length;
  sample_index.reserve(static_cast<size_t>(total_samples + 1));
  int64_t position = 0, offset = 0;
  sample_index.emplace_back(position, offset);
  for (int64_t s = 0; s < total_samples; ++s) {
    int64_t remaining = seq_length + kExtraToken;
    while (remaining != 0) {
      const int64_t available = data_->sequence_length(document_index[static_cast<size_t>(position)]) - offset;
      remaining -= available;
      if (remaining <= 0) {
        offset += remaining + available - kExtraToken;
        remaining = 0;
      } else {
        ++position;
        offset = 0;
      }
    }
    sample_index.emplace_back(position, offset);
  }

  const int64_t leading = separate_final_epoch ? samples_before_final : total_samples;
  shuffle_index.resize(static_cast<size_t>(total_samples));
  std::iota(shuffle_index.begin(), shuffle_index.end(), 0);
  shuffle_range(shuffle_index, 0, static_cast<size_t>(leading), rng);
  shuffle_range(shuffle_index, static_cast<size_t>(leading), shuffle_index.size(), rng);
}

void GPTDataset::sample(int64_t index, int64_t* out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range(data_->path() + ": sample " + std::to_string(index) + " of " + std::to_string(size()));
  }
  const size_t boundary = static_cast<size_t>(indices_.shuffle_index[static_cast<size_t>(index)]);
  const auto [first_position, first_offset] = indices_.sample_index[boundary];
  const auto [last_position, last_offset] = indices_.sample_index[boundary + 1];
  int64_t written = 0;
  const serialization::MappedReadScope reading("sample", index);
  for (int64_t p = first_position; p <= last_position; ++p) {
    const int64_t sequence = indices_.document_index[static_cast<size_t>(p)];
    const int64_t from = p == first_position ? first_offset : 0;
    const int64_t to = p == last_position ? last_offset + kExtraToken : data_->sequence_length(sequence);
    data_->read(sequence, from, to - from, out + written);
    written += to - from;
  }
  if (written != sample_length()) {
    throw std::logic_error(data_->path() + ": sample " + std::to_string(index) + " has " + std::to_string(written) +
                           " tokens, expected " + std::to_string(sample_length()));
  }
}

}  // namespace megacpp::io::data
