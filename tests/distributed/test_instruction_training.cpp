// Training on instruction data (--is-instruction-dataset, Note [Instruction data]): the loss of a
// micro-batch is the mean cross-entropy over the assistants' tokens and nothing else, computed
// here from the labels dataset by hand, with the gradients of a loss from which the masked labels
// are dropped, and the same with micro-batches cut to their longest
// conversation (--variable-seq-lengths); the same losses on one rank without FSDP, FSDP on 2
// ranks (with and without the cut) and HSDP on 4, and the model learns; a conversation longer
// than the sample and flags that do not fit are refused by name.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "io/data/instruction_data.h"
#include "io/data/instruction_dataset.h"
#include "models/llama/llama_model.h"
#include "parallel/group.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"
#include "training/step/language_model_loss.h"

namespace megacpp {
namespace {

// 24 Alpaca conversations about numbers, byte-level tokens, ChatML: PREFIX of the datasets.
std::string write_number_conversations(const std::string& dir) {
  std::string lines;
  for (int i = 0; i < 24; ++i) {
    lines += "{\"instruction\": \"Double " + std::to_string(i) + ".\", \"input\": \"\", \"output\": \"" + std::to_string(2 * i) + "\"}\n";
  }
  testing::write_file(dir, "numbers.jsonl", lines);
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir + "/numbers.jsonl --output-prefix " +
                                         dir + "/numbers --handler-name AlpacaStyleInstructionHandler --prompt-type chatml");
  EXPECT_EQ(made.status, 0) << made.output;
  return dir + "/numbers";
}

const std::string kNumberSft =
    "--model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--tokenizer-type ByteLevelTokenizer --seq-length 95 --micro-batch-size 2 --global-batch-size 8 --split 100,0,0 "
    "--log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 12 --seed 5 --stage sft --is-instruction-dataset --data-path ";

TEST(InstructionTraining, TheLossIsTheMeanOverTheAssistantsTokensOnly) {
  const std::string prefix = write_number_conversations(testing::scratch_dir());
  const auto records = io::data::InstructionRecords::open(prefix);
  const io::data::InstructionDataset data(records, 0, records.size(), 96, 256, 7, 4);
  const training::data::MicroBatch batch = training::data::load_micro_batch(data, 0, 0, {4, 0, 1}, 257);
  ASSERT_TRUE(batch.loss_mask.defined());

  models::LlamaConfig config = testing::tiny_llama(false, false);
  config.vocab_size = 384;
  config.max_position_embeddings = 96;
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.2, 3);
  const at::Tensor loss = training::step::language_model_loss(model, batch, parallel::Group::single(0));

  // By hand: label i is token i + 1, counted where the labels dataset has no -100 there.
  const at::Tensor logits = model(batch.tokens.narrow(1, 0, 95)).detach();
  double sum = 0;
  int64_t count = 0, padding = 0;
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t sample = b, conversation = [&] {
      for (int64_t c = 0; c < records.size(); ++c) {  // the conversation sample b was drawn from: equal ids
        std::vector<int64_t> ids(static_cast<size_t>(records.ids->sequence_length(c)));
        records.ids->read(c, 0, static_cast<int64_t>(ids.size()), ids.data());
        if (torch::equal(batch.tokens[sample].narrow(0, 0, static_cast<int64_t>(ids.size())), torch::tensor(ids))) return c;
      }
      return int64_t{-1};
    }();
    ASSERT_GE(conversation, 0);
    const int64_t length = records.labels->sequence_length(conversation);
    std::vector<int64_t> labels(static_cast<size_t>(length));
    records.labels->read(conversation, 0, length, labels.data());
    for (int64_t i = 0; i + 1 < 96; ++i) {
      const bool counted = i + 1 < length && labels[static_cast<size_t>(i + 1)] != io::data::kIgnoreIndex;
      EXPECT_EQ(batch.loss_mask[b][i].item<float>(), counted ? 1.0f : 0.0f) << b << " " << i;
      padding += i + 1 >= length;
      if (!counted) continue;
      sum -= torch::log_softmax(logits[b][i], -1)[batch.tokens[b][i + 1]].item<double>();
      ++count;
    }
  }
  EXPECT_GT(padding, 0) << "the samples are padded";
  EXPECT_GT(count, 0);
  EXPECT_NEAR(loss.item<double>(), sum / static_cast<double>(count), 1e-5);

  // Its gradients are those of the cross-entropy over the counted labels alone, the masked ones
  // dropped from the logits before the loss: a masked label contributes nothing to them either.
  const auto gradients_of = [&](const at::Tensor& of) {
    for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
    of.backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : model.parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const std::vector<at::Tensor> masked = gradients_of(loss);
  const at::Tensor kept = batch.loss_mask.reshape(-1).nonzero().squeeze(1);
  const at::Tensor kept_logits = model(batch.tokens.narrow(1, 0, 95)).reshape({-1, config.vocab_size}).index_select(0, kept);
  const at::Tensor kept_labels = batch.tokens.narrow(1, 1, 95).reshape(-1).index_select(0, kept);
  const std::vector<at::Tensor> dropped = gradients_of(torch::nn::functional::cross_entropy(kept_logits, kept_labels));
  ASSERT_EQ(masked.size(), dropped.size());
  for (size_t i = 0; i < masked.size(); ++i) {
    EXPECT_GT(dropped[i].abs().max().item<double>(), 0) << "parameter " << i;
    EXPECT_LE((masked[i] - dropped[i]).abs().max().item<double>(), 1e-5 * (1 + dropped[i].abs().max().item<double>())) << "parameter " << i;
  }

  // --variable-seq-lengths: the micro-batch as wide as its longest conversation, the same loss.
  const io::data::InstructionDataset variable(records, 0, records.size(), 96, 256, 7, 4, /*variable_lengths=*/true);
  const training::data::MicroBatch cut = training::data::load_micro_batch(variable, 0, 0, {4, 0, 1}, 257);
  int64_t longest = 0;
  for (int64_t b = 0; b < 4; ++b) longest = std::max(longest, variable.unpadded_length(b));
  EXPECT_EQ(cut.tokens.size(1), longest);
  EXPECT_LT(longest, 96);
  EXPECT_TRUE(torch::equal(cut.tokens, batch.tokens.narrow(1, 0, longest)));
  EXPECT_NEAR(training::step::language_model_loss(model, cut, parallel::Group::single(0)).item<double>(), loss.item<double>(), 1e-6);
}

TEST(InstructionTraining, SameLossesOnEveryLayoutAndTheModelLearns) {
  const std::string dir = testing::scratch_dir();
  const std::string prefix = write_number_conversations(dir);
  const testing::TrainRun one = testing::train(1, kNumberSft + prefix);
  testing::expect_trained(one, 12);
  EXPECT_LT(one.losses.back(), 0.7 * one.losses.front()) << "the model does not learn the answers";
  EXPECT_NE(one.result.output.find("instruction data: 24 conversations of " + prefix), std::string::npos) << one.result.output;
  testing::expect_same_losses(one, testing::train(2, kNumberSft + prefix + " --use-torch-fsdp2"), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(4, kNumberSft + prefix + testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\n")),
                              "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kNumberSft + prefix + " --use-torch-fsdp2 --variable-seq-lengths"),
                              "FSDP on 2 ranks, micro-batches cut to their longest conversation", 1e-5);
}

TEST(InstructionTraining, RefusesWhatDoesNotFitByName) {
  const std::string prefix = write_number_conversations(testing::scratch_dir());
  const std::string base = "--model-type llama --tokenizer-type ByteLevelTokenizer --micro-batch-size 1 --train-iters 1 --eval-iters 0 ";
  const auto short_samples = testing::train(1, base + "--seq-length 16 --is-instruction-dataset --data-path " + prefix);
  EXPECT_NE(short_samples.result.output.find(prefix + "_packed_input_ids_document: conversation 0 has"), std::string::npos)
      << short_samples.result.output;
  EXPECT_NE(short_samples.result.output.find("more than --seq-length + 1 (17)"), std::string::npos) << short_samples.result.output;
  const auto mock = testing::train(1, base + "--seq-length 16 --is-instruction-dataset --mock-data");
  EXPECT_NE(mock.result.output.find("--is-instruction-dataset needs --data-path PREFIX"), std::string::npos) << mock.result.output;
  const auto token_data = testing::train(1, base + "--seq-length 16 --mock-data --variable-seq-lengths");
  EXPECT_NE(token_data.result.output.find("--variable-seq-lengths needs --is-instruction-dataset"), std::string::npos)
      << token_data.result.output;
}

}  // namespace
}  // namespace megacpp
