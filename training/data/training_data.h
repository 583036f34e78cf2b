// The data side of a training run: the train / validation / test sample sources built from
// the flags, and which samples of a global batch this data-parallel rank reads.
//
// The position in the data is one number, the samples consumed so far; global batch g covers
// samples [consumed, consumed + global_batch) of the (already shuffled) sample stream. As in
// Megatron's pretraining sampler, micro-batch m of data-parallel rank r holds samples
// consumed + (m * dp + r) * micro + [0, micro), so no rank reads another's samples.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "settings/arguments.h"
#include "io/data/sample_source.h"

namespace megacpp::training::data {

struct TrainingData {
  std::array<std::shared_ptr<const io::data::SampleSource>, 3> splits;  // train, validation, test (null: none)
  std::array<int64_t, 3> samples_needed{0, 0, 0};
  std::vector<std::string> summary;
};

// Builds the datasets (real or --mock-data) sized for the whole run. `writes_index_cache`: this
// rank writes the sample indices to --data-cache-path (one rank does). The training split holds
// at least `training_samples` (what a ramped-up batch reads).
TrainingData build_training_data(const settings::TrainingArguments& args, int64_t global_batch, bool writes_index_cache,
                                 int64_t training_samples = 0);

struct BatchSlice {
  int64_t micro_batch_size;
  int dp_rank, dp_size;
  // --variable-seq-lengths: a micro-batch's labels rounded up to a multiple of this (Ulysses'
  // group size, so that its ranks take equal slices).
  int64_t length_multiple = 1;
};

// One micro-batch, on the CPU as read or on the device.
struct MicroBatch {
  at::Tensor tokens;     // [micro, seq + 1] int64
  at::Tensor loss_mask;  // [micro, seq] float, 1 where the label counts; undefined: every label counts
  at::Tensor images;     // [images, channels, size, size] float, the samples' in order; undefined: none
  // Note [Packed documents]: of the seq input tokens, [micro, seq] int64; undefined: not reset.
  at::Tensor position_ids, document_ids;
  MicroBatch to(const c10::Device& device) const;
};

// Megatron's document-boundary flags. A document ends at the tokenizer's end-of-document token
// (which belongs to it), or where the data says (instruction data: its conversations).
struct DocumentBoundaries {
  bool reset_position_ids = false;    // --reset-position-ids
  bool reset_attention_mask = false;  // --reset-attention-mask
  bool eod_mask_loss = false;         // --eod-mask-loss: no loss where the input token is the end of document
  int64_t eod = -1;
  bool any() const { return reset_position_ids || reset_attention_mask || eod_mask_loss; }
  static DocumentBoundaries of(const settings::TrainingArguments& args);
};

// Micro-batch `micro` of the global batch that starts at sample `consumed`. Throws
// std::runtime_error if a token id is outside [0, vocab_size) of the tokenizer: data made with
// another tokenizer than --tokenizer-type (image-text data is tokenized as it is read).
MicroBatch load_micro_batch(const io::data::SampleSource& source, int64_t consumed, int64_t micro, const BatchSlice& slice,
                            int64_t vocab_size, const DocumentBoundaries& documents = {});

}  // namespace megacpp::training::data
