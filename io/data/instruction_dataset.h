// Training samples of MindSpeed-LLM's instruction datasets (Note [Instruction data] in
// instruction_data.h): one conversation (or one pack of them) per sample, its ids then the
// end-of-document id as padding up to the sample length, the loss counting the labels that are
// not -100 (the assistants' tokens) and no padding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/data/sample_source.h"

namespace megacpp::io::data {

// The datasets under PREFIX, opened once and shared by the splits.
struct InstructionRecords {
  std::string prefix;
  // documents: the attention-mask dataset, which conversation of a pack each token is from.
  std::shared_ptr<const TokenDataset> ids, labels, documents;
  // Opens PREFIX_packed_{input_ids,labels,attention_mask}_document; throws std::runtime_error
  // naming them when one is missing or they disagree on a sample's length.
  static InstructionRecords open(const std::string& prefix);
  int64_t size() const { return ids->num_sequences(); }
};

class InstructionDataset final : public SampleSource {
 public:
  // Conversations [first, first + count) of `records`, read in a new order on each pass
  // (drawn from `seed`), `size` samples of `sample_length` tokens (--seq-length + 1) in all.
  // Throws std::invalid_argument naming the dataset and the conversation for one longer than
  // `sample_length`.
  // With `variable_lengths` (--variable-seq-lengths) unpadded_length is the conversation's own;
  // with `pass_multiple` > 1 (--padded-samples: the global batch) each pass is padded with its
  // first conversations to a multiple of it (shuffled_passes in random.h).
  InstructionDataset(InstructionRecords records, int64_t first, int64_t count, int64_t sample_length, int64_t pad_id,
                     uint64_t seed, int64_t size, bool variable_lengths = false, int64_t pass_multiple = 1);

  int64_t size() const override { return static_cast<int64_t>(order_.size()); }
  int64_t sample_length() const override { return sample_length_; }
  void sample(int64_t index, int64_t* out) const override;
  int64_t unpadded_length(int64_t index) const override;
  bool has_loss_mask() const override { return true; }
  void sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const override;
  // The conversation of each token in its pack (1, 2, ...; 1 for an unpacked sample), 0 for padding.
  bool sample_documents(int64_t index, int64_t* out) const override;

 private:
  int64_t conversation(int64_t index) const;

  InstructionRecords records_;
  int64_t sample_length_, pad_id_;
  bool variable_lengths_;
  std::vector<int64_t> order_;
};

}  // namespace megacpp::io::data
