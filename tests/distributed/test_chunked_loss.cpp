// --loss-compute-mode chunk (Note [Chunked loss]): the output layer's loss computed a chunk of
// tokens at a time gives the loss and the gradients of the whole logits, for the function
// itself, a Llama with its own lm_head and a GPT with tied embeddings, masked or not; training
// with it gives the default mode's losses on one rank, FSDP on 2 and Ulysses on 2; the vocabulary
// group it reads lasts for its model's forward only, also when that throws.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/gpt/gpt_model.h"
#include "models/layers/chunked_cross_entropy.h"
#include "models/llama/llama_model.h"
#include "parallel/group.h"
#include "parallel/module.h"
#include "parallel/vocab_parallel.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"
#include "training/step/language_model_loss.h"

namespace megacpp {
namespace {

TEST(ChunkedLoss, GivesTheLossAndGradientsOfTheWholeLogits) {
  torch::manual_seed(0);
  const at::Tensor hidden0 = torch::randn({23, 8}, torch::kDouble), weight0 = torch::randn({11, 8}, torch::kDouble);
  const at::Tensor labels = torch::randint(11, {23}, torch::kLong);
  const at::Tensor weights = torch::rand({23}, torch::kDouble).gt(0.3).to(torch::kDouble) / 7.0;
  const at::Tensor hidden = hidden0.clone().requires_grad_(), weight = weight0.clone().requires_grad_();
  const at::Tensor whole = (torch::cross_entropy_loss(torch::matmul(hidden, weight.t()), labels, {}, at::Reduction::None) * weights).sum();
  whole.backward();
  for (int64_t chunk : {1, 4, 23, 100}) {
    const at::Tensor h = hidden0.clone().requires_grad_(), w = weight0.clone().requires_grad_();
    const at::Tensor loss = models::chunked_linear_cross_entropy(h, w, labels, weights, chunk);
    (loss * 3.0).backward();
    EXPECT_NEAR(loss.item<double>(), whole.item<double>(), 1e-6) << chunk;
    EXPECT_LT((h.grad() - 3.0 * hidden.grad()).abs().max().item<double>(), 1e-6) << chunk;
    EXPECT_LT((w.grad() - 3.0 * weight.grad()).abs().max().item<double>(), 1e-6) << chunk;
  }
  torch::NoGradGuard no_grad;  // validation: the loss alone
  EXPECT_NEAR(models::chunked_linear_cross_entropy(hidden0, weight0, labels, weights, 5).item<double>(), whole.item<double>(), 1e-6);
}

// The loss and every parameter's gradient of a micro-batch, by the whole logits and by chunks of 5.
void expect_chunks_match(models::LanguageModel& model, const training::data::MicroBatch& batch) {
  auto run = [&](int64_t chunk) {
    model.set_loss_chunk_size(chunk);
    model.zero_grad();
    const at::Tensor loss = training::step::language_model_loss(model, batch, parallel::Group::single(0));
    loss.backward();
    std::vector<at::Tensor> grads{loss.detach()};
    for (const auto& p : model.parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const auto whole = run(0), chunked = run(5);
  EXPECT_NEAR(chunked[0].item<double>(), whole[0].item<double>(), 1e-5);
  for (size_t i = 1; i < whole.size(); ++i) EXPECT_LT((chunked[i] - whole[i]).abs().max().item<double>(), 1e-5) << "parameter " << i;
}

TEST(ChunkedLoss, ModelsGiveTheDefaultLossAndGradients) {
  torch::manual_seed(1);
  training::data::MicroBatch batch;
  batch.tokens = torch::randint(50, {2, 13}, torch::kLong);
  models::LlamaModel llama(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
  llama.init_weights(0.2, 3);
  expect_chunks_match(llama, batch);
  batch.loss_mask = torch::rand({2, 12}).gt(0.4).to(torch::kFloat);
  expect_chunks_match(llama, batch);

  models::GptConfig config;
  config.vocab_size = 50;
  config.hidden_size = 32;
  config.max_position_embeddings = 16;
  config.attention_dropout = config.hidden_dropout = 0.0;
  models::GptModel gpt(config, torch::TensorOptions().dtype(torch::kFloat));
  gpt.init_weights(0.2, 3);
  expect_chunks_match(gpt, batch);
}

const std::string kChunkTrain =
    "--model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--untie-embeddings-and-output-weights --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 4 "
    "--log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 4 --seed 5 ";

TEST(ChunkedLoss, TrainsWithTheDefaultLossesOnEveryLayout) {
  const testing::TrainRun one = testing::train(1, kChunkTrain);
  testing::expect_trained(one, 4);
  const std::string chunk = "--loss-compute-mode chunk --loss-chunk-size 7 ";
  testing::expect_same_losses(one, testing::train(1, kChunkTrain + chunk), "chunks of 7 on 1 rank", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kChunkTrain + chunk + "--use-torch-fsdp2"), "chunks of 7, FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kChunkTrain + chunk + "--use-torch-fsdp2 --context-parallel-size 2"),
                              "chunks of 7, Ulysses on 2 ranks", 1e-5);
  const auto bad = testing::train(1, kChunkTrain + "--loss-compute-mode chunks");
  EXPECT_NE(bad.result.output.find("--loss-compute-mode chunks: expected default or chunk"), std::string::npos) << bad.result.output;
}

// The chunked loss reads the vocabulary group of the model whose forward runs (Note [Vocabulary
// parallelism]): set for that forward only, and unset again when it throws, so that a later
// model on the thread (of another layout) does not read it.
class ThrowingModel : public parallel::Module {
 public:
  const parallel::Group* seen = nullptr;

 protected:
  at::Tensor forward(const at::Tensor& input) override {
    seen = parallel::vocab_parallel_group();
    if (input.numel() == 0) throw std::invalid_argument("no tokens");
    return input;
  }
};

TEST(ChunkedLoss, TheVocabularyGroupLastsForItsModelsForwardOnly) {
  ThrowingModel model;
  parallel::split_model_vocabulary(model, parallel::Group::single(0));
  model(torch::ones({2, 3}));
  EXPECT_NE(model.seen, nullptr) << "set while the forward runs";
  EXPECT_EQ(parallel::vocab_parallel_group(), nullptr) << "unset after it";
  EXPECT_THROW(model(torch::ones({0})), std::invalid_argument);
  EXPECT_NE(model.seen, nullptr);
  EXPECT_EQ(parallel::vocab_parallel_group(), nullptr) << "unset after a forward that threw";
}

}  // namespace
}  // namespace megacpp
