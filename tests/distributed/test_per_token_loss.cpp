// Megatron's --calculate-per-token-loss: the loss of an iteration is the sum over every counted
// label of the global batch divided by their count, and so are its gradients; checked by hand
// against cross-entropy over all micro-batches at once (masked labels ignored), and as the
// same training and validation losses on one rank, FSDP on 2, HSDP 2x2 and Ulysses 2 (also with
// micro-batches cut to their longest conversation, padded to a multiple of the group).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "io/data/instruction_data.h"
#include "io/data/instruction_dataset.h"
#include "models/llama/llama_model.h"
#include "parallel/group.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"
#include "training/step/forward_backward.h"

namespace megacpp {
namespace {

// 24 Alpaca conversations of different lengths, byte-level tokens, ChatML: PREFIX of the datasets.
std::string write_letter_conversations(const std::string& dir) {
  std::string lines;
  for (int i = 0; i < 24; ++i) {
    const std::string answer = std::string(static_cast<size_t>(1 + i * 7 % 20), static_cast<char>('a' + i % 7));
    lines += "{\"instruction\": \"Repeat " + std::to_string(i) + ".\", \"input\": \"\", \"output\": \"" + answer + "\"}\n";
  }
  testing::write_file(dir, "letters.jsonl", lines);
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir + "/letters.jsonl --output-prefix " +
                                         dir + "/letters --handler-name AlpacaStyleInstructionHandler --prompt-type chatml");
  EXPECT_EQ(made.status, 0) << made.output;
  return dir + "/letters";
}

std::vector<at::Tensor> gradients_of(models::LlamaModel& model) {
  std::vector<at::Tensor> grads;
  for (auto& p : model.parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    p.mutable_grad() = at::Tensor();
  }
  return grads;
}

TEST(PerTokenLoss, IsTheSumOverTheGlobalBatchsLabelsOverTheirCount) {
  const std::string prefix = write_letter_conversations(testing::scratch_dir());
  const auto records = io::data::InstructionRecords::open(prefix);
  const io::data::InstructionDataset data(records, 0, records.size(), 97, 256, 7, 8);
  const std::vector<training::data::MicroBatch> batches = {training::data::load_micro_batch(data, 0, 0, {1, 0, 1}, 257),
                                                     training::data::load_micro_batch(data, 0, 1, {1, 0, 1}, 257)};
  const double first = batches[0].loss_mask.sum().item<double>(), second = batches[1].loss_mask.sum().item<double>();
  ASSERT_NE(first, second) << "the micro-batches count different numbers of labels";

  models::LlamaConfig config = testing::tiny_llama(false, false);
  config.vocab_size = 384;
  config.max_position_embeddings = 96;
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.2, 3);

  // By hand: one cross-entropy over both micro-batches' labels, the masked ones ignored.
  at::Tensor tokens = torch::cat({batches[0].tokens, batches[1].tokens});
  at::Tensor labels = tokens.narrow(1, 1, 96).clone();
  labels.masked_fill_(torch::cat({batches[0].loss_mask, batches[1].loss_mask}).eq(0), -100);
  const at::Tensor logits = model(tokens.narrow(1, 0, 96));
  const at::Tensor expected = torch::cross_entropy_loss(logits.reshape({-1, 384}), labels.reshape({-1}), {}, at::Reduction::Mean, -100);
  expected.backward();
  const std::vector<at::Tensor> expected_grads = gradients_of(model);

  training::step::ForwardBackwardSetup setup;
  setup.per_token_loss = true;
  const training::step::ForwardBackwardResult per_token = training::step::forward_backward(model, batches, setup, nullptr);
  EXPECT_NEAR(per_token.mean_loss, expected.item<double>(), 1e-5);
  const std::vector<at::Tensor> grads = gradients_of(model);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(torch::allclose(grads[i], expected_grads[i], 1e-4, 1e-6)) << i;

  // Megatron's default, the mean of the micro-batches' means, is another figure here.
  setup.per_token_loss = false;
  EXPECT_GT(std::abs(training::step::forward_backward(model, batches, setup, nullptr).mean_loss - expected.item<double>()), 1e-4);
}

const std::string kLetterSft =
    "--model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--tokenizer-type ByteLevelTokenizer --seq-length 96 --micro-batch-size 2 --global-batch-size 8 --split 80,20,0 "
    "--log-interval 1 --lr 1e-2 --eval-interval 3 --eval-iters 1 --train-iters 6 --seed 5 --stage sft --is-instruction-dataset "
    "--data-path ";

TEST(PerTokenLoss, SameLossesOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string prefix = write_letter_conversations(dir);
  const std::string data = prefix + " --calculate-per-token-loss";
  const testing::TrainRun one = testing::train(1, kLetterSft + data);
  testing::expect_trained(one, 6);
  ASSERT_EQ(one.validation.size(), 3u) << one.result.output;  // iterations 3 and 6, and the end
  // Without the flag, each micro-batch's mean weighs alike: other losses.
  const testing::TrainRun means = testing::train(1, kLetterSft + prefix);
  testing::expect_trained(means, 6);
  double largest = 0;
  for (size_t i = 0; i < one.losses.size(); ++i) largest = std::max(largest, std::abs(means.losses[i] / one.losses[i] - 1));
  EXPECT_GT(largest, 1e-3);
  testing::expect_same_losses(one, testing::train(2, kLetterSft + data + " --use-torch-fsdp2"), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(4, kLetterSft + data + testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\n")),
                              "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kLetterSft + data + " --use-torch-fsdp2 --context-parallel-size 2"), "Ulysses 2", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kLetterSft + data + " --use-torch-fsdp2 --context-parallel-size 2 --variable-seq-lengths"),
                              "Ulysses 2, micro-batches cut to their longest conversation", 1e-5);
}

}  // namespace
}  // namespace megacpp
