#include "io/data/instruction_dataset.h"

#include <algorithm>
#include <stdexcept>

#include "io/data/instruction_data.h"
#include "io/data/random.h"

namespace megacpp::io::data {

InstructionRecords InstructionRecords::open(const std::string& prefix) {
  InstructionRecords r{prefix, open_token_dataset(instruction_input_ids_path(prefix)), open_token_dataset(instruction_labels_path(prefix)),
                       open_token_dataset(instruction_attention_mask_path(prefix))};
  for (const auto& other : {r.labels, r.documents}) {
    if (r.ids->num_sequences() != other->num_sequences()) {
      throw std::runtime_error(other->path() + ": " + std::to_string(other->num_sequences()) + " samples, but " + r.ids->path() +
                               " has " + std::to_string(r.ids->num_sequences()));
    }
    for (int64_t i = 0; i < r.size(); ++i) {
      if (r.ids->sequence_length(i) != other->sequence_length(i)) {
        throw std::runtime_error(other->path() + ": sample " + std::to_string(i) + " has " + std::to_string(other->sequence_length(i)) +
                                 " values for " + std::to_string(r.ids->sequence_length(i)) + " ids");
      }
    }
  }
  if (r.size() == 0) throw std::runtime_error(r.ids->path() + ": no conversations");
  return r;
}

InstructionDataset::InstructionDataset(InstructionRecords records, int64_t first, int64_t count, int64_t sample_length,
                                       int64_t pad_id, uint64_t seed, int64_t size, bool variable_lengths, int64_t pass_multiple)
    : records_(std::move(records)), sample_length_(sample_length), pad_id_(pad_id), variable_lengths_(variable_lengths) {
  if (count <= 0 || first < 0 || first + count > records_.size()) {
    throw std::invalid_argument("InstructionDataset: conversations [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                ") of " + std::to_string(records_.size()));
  }
  for (int64_t c = first; c < first + count; ++c) {
    const int64_t length = records_.ids->sequence_length(c);
    if (length > sample_length_) {
      throw std::invalid_argument(records_.ids->path() + ": conversation " + std::to_string(c) + " has " + std::to_string(length) +
                                  " tokens, more than --seq-length + 1 (" + std::to_string(sample_length_) +
                                  "); raise --seq-length or leave it out of the data (megacpp-preprocess --seq-length)");
    }
  }
  order_ = shuffled_passes(first, count, size, seed, pass_multiple);
}

int64_t InstructionDataset::conversation(int64_t index) const {
  if (index < 0 || index >= size()) throw std::out_of_range("instruction sample " + std::to_string(index) + " of " + std::to_string(size()));
  return order_[static_cast<size_t>(index)];
}

int64_t InstructionDataset::unpadded_length(int64_t index) const {
  return variable_lengths_ ? records_.ids->sequence_length(conversation(index)) : sample_length_;
}

void InstructionDataset::sample(int64_t index, int64_t* out) const {
  const int64_t c = conversation(index), length = records_.ids->sequence_length(c);
  records_.ids->read(c, 0, length, out);
  std::fill(out + length, out + sample_length_, pad_id_);
}

void InstructionDataset::sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& /*pixels*/) const {
  const int64_t c = conversation(index), length = records_.labels->sequence_length(c);
  std::vector<int64_t> labels(static_cast<size_t>(length));
  records_.labels->read(c, 0, length, labels.data());
  // Label i is token i + 1.
  for (int64_t i = 0; i + 1 < sample_length_; ++i) loss_mask[i] = i + 1 < length && labels[static_cast<size_t>(i + 1)] != kIgnoreIndex;
}

bool InstructionDataset::sample_documents(int64_t index, int64_t* out) const {
  const int64_t c = conversation(index), length = std::min(records_.documents->sequence_length(c), sample_length_ - 1);
  records_.documents->read(c, 0, length, out);
  std::fill(out + length, out + sample_length_ - 1, int64_t{0});
  return true;
}

}  // namespace megacpp::io::data
