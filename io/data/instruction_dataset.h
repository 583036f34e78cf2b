// Training samples of MindSpeed-LLM's instruction datasets (Note [Instruction data] in
// instruction_data.h): one conversation per sample, its ids then the end-of-document id as
// padding up to the sample length, the loss counting the labels that are not -100 (the
// assistants' tokens) and no padding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/data/sample_source.h"

namespace megacpp::io::data {

// The ids and labels datasets under PREFIX, opened once and shared by the splits.
struct InstructionRecords {
  std::string prefix;
  std::shared_ptr<const TokenDataset> ids, labels;
  // Opens PREFIX_packed_input_ids_document and PREFIX_packed_labels_document; throws
  // std::runtime_error naming them when either is missing or they disagree on a conversation's length.
  static InstructionRecords open(const std::string& prefix);
  int64_t size() const { return ids->num_sequences(); }
};

class InstructionDataset final : public SampleSource {
 public:
  // Conversations [first, first + count) of `records`, read in a new order on each pass
  // (drawn from `seed`), `size` samples of `sample_length` tokens (--seq-length + 1) in all.
  // Throws std::invalid_argument naming the dataset and the conversation for one longer than
  // `sample_length`.
  // With `variable_lengths` (--variable-seq-lengths) unpadded_length is the conversation's own.
  InstructionDataset(InstructionRecords records, int64_t first, int64_t count, int64_t sample_length, int64_t pad_id,
                     uint64_t seed, int64_t size, bool variable_lengths = false);

  int64_t size() const override { return static_cast<int64_t>(order_.size()); }
  int64_t sample_length() const override { return sample_length_; }
  void sample(int64_t index, int64_t* out) const override;
  int64_t unpadded_length(int64_t index) const override;
  bool has_loss_mask() const override { return true; }
  void sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const override;

 private:
  int64_t conversation(int64_t index) const;

  InstructionRecords records_;
  int64_t sample_length_, pad_id_;
  bool variable_lengths_;
  std::vector<int64_t> order_;
};

}  // namespace megacpp::io::data
