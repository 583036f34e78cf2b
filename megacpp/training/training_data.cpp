#include "megacpp/training/training_data.h"

#include <algorithm>

#include <torch/torch.h>

#include "megacpp/checked_math.h"
#include "megacpp/data/dataset_builder.h"
#include "megacpp/data/mock_dataset.h"
#include "megacpp/training/cyclic_samples.h"

namespace megacpp::training {

namespace {

// The datasets of the splits, each sized for the samples the run reads from it.
void build_splits(const TrainingArguments& args, bool writes_index_cache, const std::array<double, 3>& split, TrainingData& result) {
  if (args.mock_data) {
    const int64_t vocab = args.tokenizer_vocab_size;
    for (int s = 0; s < 3; ++s) {
      if (result.samples_needed[s] == 0) continue;
      // Each split its own seed, so validation is not a replay of the training stream.
      result.splits[s] = std::make_shared<data::MockDataset>(vocab, args.seq_length + 1, args.seed + static_cast<uint64_t>(s),
                                                             result.samples_needed[s]);
    }
    result.summary.push_back("mock data: arithmetic progressions over " + std::to_string(vocab) + " token ids");
    if (!args.data_cache_path.empty()) result.summary.push_back("--data-cache-path: mock samples have no indices to cache");
    return;
  }
  data::DatasetSplits built = data::build_gpt_datasets(data::parse_data_blend(args.data_path), split, result.samples_needed,
                                                       args.seq_length, args.seed, {args.data_cache_path, writes_index_cache});
  result.splits = built.splits;
  result.summary = built.summary;
}

}  // namespace

TrainingData build_training_data(const TrainingArguments& args, int64_t global_batch, bool writes_index_cache,
                                 int64_t training_samples) {
  TrainingData result;
  const std::array<double, 3> split = data::parse_split(args.split);
  const NamedValue iters{args.train_iters, "--train-iters"}, batch{global_batch, "global batch"},
      eval_iters{args.eval_iters, "--eval-iters"};
  // Validation every --eval-interval and at the end.
  const NamedValue evaluations{checked_sum({{args.train_iters / args.eval_interval, "--train-iters / --eval-interval"}, {1, "1"}},
                                           "the validation runs"),
                               "validation runs"};
  // Megatron sizes the training split by --train-samples when it is given.
  result.samples_needed[data::kTrain] = std::max(
      training_samples, args.train_samples > 0 ? args.train_samples : checked_product({iters, batch}, "the training samples"));
  result.samples_needed[data::kValid] =
      split[data::kValid] > 0 ? checked_product({evaluations, eval_iters, batch}, "the validation samples") : 0;
  result.samples_needed[data::kTest] = split[data::kTest] > 0 ? checked_product({eval_iters, batch}, "the test samples") : 0;
  build_splits(args, writes_index_cache, split, result);
  if (args.dataloader_type == "cyclic") {
    auto& train = result.splits[data::kTrain];
    train = std::make_shared<CyclicSamples>(train, result.samples_needed[data::kTrain], args.micro_batch_size);
    result.summary.push_back("--dataloader-type cyclic: the training samples in a random order, drawn anew for each pass");
  }
  return result;
}

at::Tensor load_micro_batch(const data::SampleSource& source, int64_t consumed, int64_t micro, const BatchSlice& slice,
                            int64_t vocab_size) {
  at::Tensor tokens = torch::empty({slice.micro_batch_size, source.sample_length()}, torch::kLong);
  const int64_t first = consumed + (micro * slice.dp_size + slice.dp_rank) * slice.micro_batch_size;
  for (int64_t i = 0; i < slice.micro_batch_size; ++i) source.sample(first + i, tokens[i].data_ptr<int64_t>());
  const int64_t lowest = tokens.min().item<int64_t>(), highest = tokens.max().item<int64_t>();
  if (lowest < 0 || highest >= vocab_size) {
    throw std::runtime_error("token id " + std::to_string(lowest < 0 ? lowest : highest) + " in samples " +
                             std::to_string(first) + ".." + std::to_string(first + slice.micro_batch_size - 1) +
                             " is outside the tokenizer's vocabulary of " + std::to_string(vocab_size) +
                             " (was --data-path made with another tokenizer than --tokenizer-type?)");
  }
  return tokens;
}

}  // namespace megacpp::training
