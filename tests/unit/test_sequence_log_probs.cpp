// inference::sequence_log_probs (Note [Forward-only sharded inference]) in one process:
// sequences of different lengths, batched and padded, score as each does alone through the
// model's forward (the training forward); their mean negative log-prob is the language-model
// loss; bad shapes, lengths and batch sizes are refused. Sharded layouts: test_fsdp2_infer.cpp.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "inference/sequence_log_probs.h"
#include "models/llama/llama_model.h"
#include "tests/support/tiny_llama.h"
#include "training/step/language_model_loss.h"

namespace megacpp {
namespace {

std::shared_ptr<models::LlamaModel> tiny_model() {
  auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(/*tied=*/false, /*qwen3=*/false),
                                                    torch::TensorOptions().dtype(torch::kFloat));
  model->init_weights(0.2, 7);
  return model;
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(SequenceLogProbs, BatchedPaddedSequencesScoreAsEachAlone) {
  auto model = tiny_model();
  const std::vector<int64_t> lengths{12, 5, 1, 9, 16};
  torch::manual_seed(3);
  // Padding with a real token id: what it would change would show.
  at::Tensor ids = torch::full({5, 16}, 7, torch::kLong);
  for (size_t i = 0; i < lengths.size(); ++i) ids[i].narrow(0, 0, lengths[i]).copy_(torch::randint(50, {lengths[i]}, torch::kLong));
  inference::SequenceScoring scoring;
  scoring.batch_size = 2;
  scoring.chunk_tokens = 7;
  const inference::TokenLogProbs scored = sequence_log_probs(*model, ids, torch::tensor(lengths), scoring);
  ASSERT_EQ(scored.log_probs.sizes(), (std::vector<int64_t>{5, 15}));
  EXPECT_TRUE(model->is_training()) << "the model is left in the mode it was in";
  model->eval();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t n = lengths[i];
    EXPECT_EQ(scored.log_probs[i].narrow(0, n - 1, 16 - n).abs().sum().item<double>(), 0.0) << "past the end of " << i;
    if (n == 1) continue;  // nothing to score
    const at::Tensor alone_ids = ids.narrow(0, i, 1).narrow(1, 0, n);
    const inference::TokenLogProbs alone = inference::token_log_probs((*model)(alone_ids), alone_ids);
    EXPECT_LE(max_abs_difference(scored.log_probs[i].narrow(0, 0, n - 1), alone.log_probs[0]), 1e-5) << "sequence " << i;
    EXPECT_LE(max_abs_difference(scored.entropy[i].narrow(0, 0, n - 1), alone.entropy[0]), 1e-5) << "sequence " << i;
  }
}

TEST(SequenceLogProbs, MeanNegativeLogProbIsTheLanguageModelLoss) {
  auto model = tiny_model();
  torch::manual_seed(4);
  training::data::MicroBatch batch;
  batch.tokens = torch::randint(50, {3, 16}, torch::kLong);
  inference::SequenceScoring scoring;
  scoring.with_entropy = false;
  const inference::TokenLogProbs scored = sequence_log_probs(*model, batch.tokens, at::Tensor(), scoring);
  EXPECT_FALSE(scored.entropy.defined());
  torch::NoGradGuard no_grad;
  const double loss = training::step::language_model_loss(*model, batch, parallel::Group::single(0)).item<double>();
  EXPECT_NEAR(-scored.log_probs.mean().item<double>(), loss, 1e-6 * loss);
}

TEST(SequenceLogProbs, RefusesBadShapesLengthsAndBatchSizes) {
  auto model = tiny_model();
  const at::Tensor ids = torch::zeros({2, 6}, torch::kLong);
  inference::SequenceScoring scoring;
  auto refused = [&](const at::Tensor& i, const at::Tensor& lengths, const inference::SequenceScoring& s, const std::string& what) {
    try {
      sequence_log_probs(*model, i, lengths, s);
      ADD_FAILURE() << "not refused: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(torch::zeros({6}, torch::kLong), at::Tensor(), scoring, "ids must be int64 [sequences, tokens]");
  refused(ids, torch::tensor({6, 7}), scoring, "every length must be between 1 and the ids' 6 tokens");
  refused(ids, torch::tensor({0, 6}), scoring, "every length must be between 1");
  refused(ids, torch::tensor({6}), scoring, "do not match ids");
  inference::SequenceScoring zero = scoring;
  zero.batch_size = 0;
  refused(ids, at::Tensor(), zero, "infer_batch_size");
}

}  // namespace
}  // namespace megacpp
