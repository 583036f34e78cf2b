#include "training/data/training_data.h"

#include <algorithm>

#include <torch/torch.h>

#include "megacpp/checked_math.h"
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/data/dataset_builder.h"
#include "io/data/image_text_dataset.h"
#include "io/data/instruction_dataset.h"
#include "io/data/mock_dataset.h"
#include "training/data/cyclic_samples.h"

namespace megacpp::training::data {

namespace {

// --data-path FILE.jsonl: its lines split by --split into contiguous ranges (as Megatron splits
// documents), each read in a new order every pass.
void build_image_text_splits(const settings::TrainingArguments& args, const std::array<double, 3>& split, TrainingData& result) {
  const std::string& path = args.data_path[0];
  const auto inputs = args.model->image_inputs();
  if (!inputs) {
    throw std::invalid_argument("--data-path " + path + " holds image-text samples, which --model-type " + args.model_type +
                                " cannot read: its model takes no images (--model-type llava does)");
  }
  const io::data::ImageTextFormat format{inputs->token_id, inputs->tokens_per_image, {inputs->size, inputs->channels, args.image_mean, args.image_std}};
  const std::shared_ptr<const io::data::Tokenizer> tokenizer = io::data::build_tokenizer(args.tokenizer);
  const auto records = std::make_shared<const std::vector<io::data::ImageTextRecord>>(
      io::data::read_image_text_file(path, *tokenizer, format, args.seq_length + 1));
  const auto bounds = io::data::split_boundaries(split, static_cast<int64_t>(records->size()));
  for (int s = 0; s < 3; ++s) {
    if (result.samples_needed[s] == 0) continue;
    const int64_t count = bounds[s + 1] - bounds[s];
    if (count == 0) {
      throw std::invalid_argument("--split " + args.split + " leaves the " + io::data::split_name(s) + " split of " + path + " (" +
                                  std::to_string(records->size()) + " lines) no sample");
    }
    result.splits[s] = std::make_shared<io::data::ImageTextDataset>(records, bounds[s], count, format, args.seq_length + 1, tokenizer->eod(),
                                                                args.seed + static_cast<uint64_t>(s), result.samples_needed[s]);
  }
  result.summary.push_back(fmt::format("image-text data: {} lines of {} (train {}, validation {}, test {}); images {}x{}x{}, {} tokens "
                                       "each (id {}), normalized with mean {} and std {}",
                                       records->size(), path, bounds[1] - bounds[0], bounds[2] - bounds[1], bounds[3] - bounds[2],
                                       inputs->channels, inputs->size, inputs->size, inputs->tokens_per_image, inputs->token_id,
                                       fmt::join(args.image_mean, ","), fmt::join(args.image_std, ",")));
  if (!args.data_cache_path.empty()) result.summary.push_back("--data-cache-path: image-text samples have no indices to cache");
}

// --is-instruction-dataset: the conversations of PREFIX split by --split into contiguous ranges,
// each read in a new order every pass (Note [Instruction data]).
// --padded-samples pads each pass to whole global batches of `global_batch`.
void build_instruction_splits(const settings::TrainingArguments& args, const std::array<double, 3>& split, int64_t global_batch,
                              TrainingData& result) {
  const io::data::InstructionRecords records = io::data::InstructionRecords::open(args.data_path[0]);
  const int64_t pad = io::data::build_tokenizer(args.tokenizer)->eod();
  const auto bounds = io::data::split_boundaries(split, records.size());
  for (int s = 0; s < 3; ++s) {
    if (result.samples_needed[s] == 0) continue;
    const int64_t count = bounds[s + 1] - bounds[s];
    if (count == 0) {
      throw std::invalid_argument("--split " + args.split + " leaves the " + io::data::split_name(s) + " split of " + args.data_path[0] +
                                  " (" + std::to_string(records.size()) + " conversations) no sample");
    }
    result.splits[s] = std::make_shared<io::data::InstructionDataset>(records, bounds[s], count, args.seq_length + 1, pad,
                                                                      args.seed + static_cast<uint64_t>(s), result.samples_needed[s],
                                                                      args.variable_seq_lengths, args.padded_samples ? global_batch : 1);
  }
  result.summary.push_back(fmt::format("instruction data: {} conversations of {} (train {}, validation {}, test {}), padded to {} "
                                       "tokens with id {}{}, the loss on the assistants' tokens",
                                       records.size(), args.data_path[0], bounds[1] - bounds[0], bounds[2] - bounds[1],
                                       bounds[3] - bounds[2], args.seq_length + 1, pad,
                                       args.variable_seq_lengths ? " (each micro-batch cut to its longest, --variable-seq-lengths)" : ""));
  if (args.padded_samples) {
    result.summary.push_back(fmt::format("--padded-samples: each pass over a split padded with its first conversations to a "
                                         "multiple of the global batch ({})", global_batch));
  }
  if (!args.data_cache_path.empty()) result.summary.push_back("--data-cache-path: instruction samples have no indices to cache");
}

// The datasets of the splits, each sized for the samples the run reads from it.
void build_splits(const settings::TrainingArguments& args, bool writes_index_cache, const std::array<double, 3>& split,
                  int64_t global_batch, TrainingData& result) {
  if (args.mock_data) {
    const int64_t vocab = args.tokenizer_vocab_size;
    for (int s = 0; s < 3; ++s) {
      if (result.samples_needed[s] == 0) continue;
      // Each split its own seed, so validation is not a replay of the training stream.
      result.splits[s] = std::make_shared<io::data::MockDataset>(vocab, args.seq_length + 1, args.seed + static_cast<uint64_t>(s),
                                                             result.samples_needed[s]);
    }
    result.summary.push_back("mock data: arithmetic progressions over " + std::to_string(vocab) + " token ids");
    if (!args.data_cache_path.empty()) result.summary.push_back("--data-cache-path: mock samples have no indices to cache");
    return;
  }
  if (io::data::is_image_text_path(args.data_path)) return build_image_text_splits(args, split, result);
  if (args.is_instruction_dataset) return build_instruction_splits(args, split, global_batch, result);
  io::data::DatasetSplits built = io::data::build_gpt_datasets(io::data::parse_data_blend(args.data_path), split, result.samples_needed,
                                                       args.seq_length, args.seed, {args.data_cache_path, writes_index_cache});
  result.splits = built.splits;
  result.summary = built.summary;
}

// The loss mask (and the images, for image-text data) of the micro-batch's samples from `first` on.
MicroBatch with_extras(const io::data::SampleSource& source, int64_t first, MicroBatch batch) {
  const int64_t micro = batch.tokens.size(0), labels = source.sample_length() - 1;
  std::vector<uint8_t> mask(static_cast<size_t>(micro * labels));
  std::vector<float> pixels;
  for (int64_t i = 0; i < micro; ++i) source.sample_extras(first + i, mask.data() + i * labels, pixels);
  batch.loss_mask = torch::from_blob(mask.data(), {micro, labels}, torch::kUInt8).to(torch::kFloat);
  if (!source.has_images()) return batch;
  std::vector<int64_t> shape = source.image_shape();
  shape.insert(shape.begin(), -1);
  batch.images = torch::from_blob(pixels.data(), {static_cast<int64_t>(pixels.size())}, torch::kFloat).view(shape).clone();
  return batch;
}

// Megatron's get_ltor_masks_and_position_ids, on the document ids: each input token's document
// (the source's, or counted from the end-of-document tokens before it) and its position in it.
MicroBatch with_documents(const io::data::SampleSource& source, int64_t first, const DocumentBoundaries& rule, MicroBatch batch) {
  const int64_t micro = batch.tokens.size(0), seq = batch.tokens.size(1) - 1;
  const at::Tensor input = batch.tokens.narrow(1, 0, seq);
  const at::Tensor is_eod = input.eq(rule.eod);
  if (rule.eod_mask_loss) {
    const at::Tensor kept = is_eod.logical_not().to(torch::kFloat);
    batch.loss_mask = batch.loss_mask.defined() ? batch.loss_mask * kept : kept;
  }
  if (!rule.reset_position_ids && !rule.reset_attention_mask) return batch;
  at::Tensor documents = torch::empty({micro, source.sample_length() - 1}, torch::kLong);
  bool recorded = true;
  for (int64_t i = 0; i < micro; ++i) recorded = source.sample_documents(first + i, documents[i].data_ptr<int64_t>()) && recorded;
  if (recorded) {
    documents = documents.narrow(1, 0, seq).contiguous();
  } else {  // a token after an end of document starts the next one
    const at::Tensor ends = is_eod.to(torch::kLong);
    documents = ends.cumsum(1) - ends;
  }
  if (rule.reset_attention_mask) batch.document_ids = documents;
  if (rule.reset_position_ids) {
    const at::Tensor index = torch::arange(seq, torch::kLong).expand({micro, seq});
    at::Tensor starts = torch::ones({micro, seq}, torch::kBool);
    if (seq > 1) starts.narrow(1, 1, seq - 1).copy_(documents.narrow(1, 1, seq - 1).ne(documents.narrow(1, 0, seq - 1)));
    const at::Tensor start_of = std::get<0>(torch::where(starts, index, torch::zeros_like(index)).cummax(1));
    batch.position_ids = index - start_of;
  }
  return batch;
}

}  // namespace

DocumentBoundaries DocumentBoundaries::of(const settings::TrainingArguments& args) {
  return {args.reset_position_ids, args.reset_attention_mask, args.eod_mask_loss, args.tokenizer_eod};
}

TrainingData build_training_data(const settings::TrainingArguments& args, int64_t global_batch, bool writes_index_cache,
                                 int64_t training_samples) {
  TrainingData result;
  const std::array<double, 3> split = io::data::parse_split(args.split);
  const NamedValue iters{args.train_iters, "--train-iters"}, batch{global_batch, "global batch"},
      eval_iters{args.eval_iters, "--eval-iters"};
  // Validation every --eval-interval and at the end.
  const NamedValue evaluations{checked_sum({{args.train_iters / args.eval_interval, "--train-iters / --eval-interval"}, {1, "1"}},
                                           "the validation runs"),
                               "validation runs"};
  // Megatron sizes the training split by --train-samples when it is given.
  result.samples_needed[io::data::kTrain] = std::max(
      training_samples, args.train_samples > 0 ? args.train_samples : checked_product({iters, batch}, "the training samples"));
  result.samples_needed[io::data::kValid] =
      split[io::data::kValid] > 0 ? checked_product({evaluations, eval_iters, batch}, "the validation samples") : 0;
  result.samples_needed[io::data::kTest] = split[io::data::kTest] > 0 ? checked_product({eval_iters, batch}, "the test samples") : 0;
  build_splits(args, writes_index_cache, split, global_batch, result);
  if (args.dataloader_type == "cyclic") {
    auto& train = result.splits[io::data::kTrain];
    train = std::make_shared<CyclicSamples>(train, result.samples_needed[io::data::kTrain], args.micro_batch_size);
    result.summary.push_back("--dataloader-type cyclic: the training samples in a random order, drawn anew for each pass");
  }
  return result;
}

MicroBatch MicroBatch::to(const c10::Device& device) const {
  auto moved = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  return {tokens.to(device), moved(loss_mask), moved(images), moved(position_ids), moved(document_ids)};
}

MicroBatch load_micro_batch(const io::data::SampleSource& source, int64_t consumed, int64_t micro, const BatchSlice& slice,
                            int64_t vocab_size, const DocumentBoundaries& documents) {
  MicroBatch batch;
  batch.tokens = torch::empty({slice.micro_batch_size, source.sample_length()}, torch::kLong);
  const int64_t first = consumed + (micro * slice.dp_size + slice.dp_rank) * slice.micro_batch_size;
  for (int64_t i = 0; i < slice.micro_batch_size; ++i) source.sample(first + i, batch.tokens[i].data_ptr<int64_t>());
  if (source.has_images()) return with_extras(source, first, std::move(batch));
  const int64_t lowest = batch.tokens.min().item<int64_t>(), highest = batch.tokens.max().item<int64_t>();
  if (lowest < 0 || highest >= vocab_size) {
    throw std::runtime_error("token id " + std::to_string(lowest < 0 ? lowest : highest) + " in samples " +
                             std::to_string(first) + ".." + std::to_string(first + slice.micro_batch_size - 1) +
                             " is outside the tokenizer's vocabulary of " + std::to_string(vocab_size) +
                             " (was --data-path made with another tokenizer than --tokenizer-type?)");
  }
  if (source.has_loss_mask()) batch = with_extras(source, first, std::move(batch));
  // --variable-seq-lengths: as wide as the longest sample (at least one label), its labels
  // rounded up to the slice's multiple (the padding is masked).
  int64_t width = 2;
  for (int64_t i = 0; i < slice.micro_batch_size; ++i) width = std::max(width, source.unpadded_length(first + i));
  const int64_t multiple = slice.length_multiple;
  width = std::min(source.sample_length(), (width - 1 + multiple - 1) / multiple * multiple + 1);
  if (width != source.sample_length()) {
    batch.tokens = batch.tokens.narrow(1, 0, width).contiguous();
    if (batch.loss_mask.defined()) batch.loss_mask = batch.loss_mask.narrow(1, 0, width - 1).contiguous();
  }
  return documents.any() ? with_documents(source, first, documents, std::move(batch)) : batch;
}

}  // namespace megacpp::training::data
