// Packed documents (Note [Packed documents] in models/language_model.h): with
// --reset-position-ids and --reset-attention-mask a sequence holding several documents gives each
// the logits and losses it has alone (Llama and GPT); the documents come from the
// end-of-document token (token data, Megatron's get_ltor_masks_and_position_ids) or from the
// numbered attention masks megacpp-preprocess --pack writes; packed conversations give the
// per-conversation losses of the conversations one by one; the same training losses on one
// rank, FSDP on 2, HSDP 2x2 and Ulysses on 2; --padded-samples pads each pass to whole global
// batches.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <torch/torch.h>

#include "io/data/instruction_data.h"
#include "io/data/instruction_dataset.h"
#include "io/data/random.h"
#include "io/data/sample_packing.h"
#include "models/gpt/gpt_model.h"
#include "models/llama/llama_model.h"
#include "parallel/group.h"
#include "tests/support/distributed_test.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"
#include "training/data/cyclic_samples.h"
#include "training/step/language_model_loss.h"

namespace megacpp {
namespace {

using Tensors = parallel::Module::Tensors;

// Two documents of 5 and 7 tokens, alone and packed into one sequence: the packed logits of
// each equal its own with both resets, and not without them (the check can fail).
void expect_packed_logits_match(models::LanguageModel& model, int64_t vocab) {
  torch::manual_seed(3);
  const at::Tensor a = torch::randint(vocab, {1, 5}, torch::kLong), b = torch::randint(vocab, {1, 7}, torch::kLong);
  const at::Tensor packed = torch::cat({a, b}, 1);
  const at::Tensor positions = torch::cat({torch::arange(5), torch::arange(7)}).unsqueeze(0);
  const at::Tensor documents = torch::cat({torch::full({5}, 1, torch::kLong), torch::full({7}, 2, torch::kLong)}).unsqueeze(0);
  torch::NoGradGuard no_grad;
  const at::Tensor alone = torch::cat({model(a), model(b)}, 1);
  const at::Tensor together = model(Tensors{packed, {}, positions, documents})[0];
  EXPECT_LT((together - alone).abs().max().item<double>(), 1e-5);
  const at::Tensor crossing = model(packed);
  EXPECT_LT((crossing.narrow(1, 0, 5) - alone.narrow(1, 0, 5)).abs().max().item<double>(), 1e-5) << "causal: a sees no b";
  EXPECT_GT((crossing.narrow(1, 5, 7) - alone.narrow(1, 5, 7)).abs().max().item<double>(), 1e-3) << "b sees a without resets";
  const at::Tensor positions_only = model(Tensors{packed, {}, positions, {}})[0];
  EXPECT_GT((positions_only.narrow(1, 5, 7) - alone.narrow(1, 5, 7)).abs().max().item<double>(), 1e-3) << "b still sees a";
}

TEST(PackedDocuments, LlamaAndGptGiveEachDocumentItsOwnLogits) {
  models::LlamaConfig llama_config = testing::tiny_llama(false, false);
  models::LlamaModel llama(llama_config, torch::TensorOptions().dtype(torch::kFloat));
  llama.init_weights(0.2, 3);
  expect_packed_logits_match(llama, llama_config.vocab_size);

  models::GptConfig gpt_config;
  gpt_config.vocab_size = 64;
  gpt_config.hidden_size = 32;
  gpt_config.max_position_embeddings = 16;
  models::GptModel gpt(gpt_config, torch::TensorOptions().dtype(torch::kFloat));
  gpt.init_weights(0.2, 3);
  gpt.eval();  // no dropout
  expect_packed_logits_match(gpt, gpt_config.vocab_size);
}

// Token samples with end-of-document tokens (id 9) where a test puts them.
class FixedSamples final : public io::data::SampleSource {
 public:
  explicit FixedSamples(std::vector<std::vector<int64_t>> samples) : samples_(std::move(samples)) {}
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t sample_length() const override { return static_cast<int64_t>(samples_[0].size()); }
  void sample(int64_t index, int64_t* out) const override {
    std::copy(samples_[static_cast<size_t>(index)].begin(), samples_[static_cast<size_t>(index)].end(), out);
  }

 private:
  std::vector<std::vector<int64_t>> samples_;
};

TEST(PackedDocuments, TokenDataEndsDocumentsAtTheEndOfDocumentToken) {
  // Inputs are the first 8 tokens; the end-of-document token belongs to the document it ends.
  const FixedSamples data({{1, 2, 9, 3, 4, 5, 9, 6, 7}, {9, 1, 2, 3, 4, 5, 6, 7, 8}});
  const training::data::DocumentBoundaries both{true, true, true, 9};
  const training::data::MicroBatch batch = training::data::load_micro_batch(data, 0, 0, {2, 0, 1}, 16, both);
  EXPECT_TRUE(torch::equal(batch.position_ids, torch::tensor({0, 1, 2, 0, 1, 2, 3, 0, 0, 0, 1, 2, 3, 4, 5, 6}).view({2, 8})));
  EXPECT_TRUE(torch::equal(batch.document_ids, torch::tensor({0, 0, 0, 1, 1, 1, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1}).view({2, 8})));
  // --eod-mask-loss: no loss where the input token is the end of document (label: the next document's first).
  EXPECT_TRUE(torch::equal(batch.loss_mask, torch::tensor({1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1}, torch::kFloat).view({2, 8})));
  const training::data::MicroBatch plain = training::data::load_micro_batch(data, 0, 0, {2, 0, 1}, 16);
  EXPECT_FALSE(plain.position_ids.defined() || plain.document_ids.defined() || plain.loss_mask.defined());
}

TEST(PackedDocuments, PacksAreFilledWithTheLongestSamplesThatFit) {
  const auto packs = io::data::pack_samples({5, 3, 8, 2, 2, 6}, 10);
  EXPECT_EQ(packs, (std::vector<std::vector<int64_t>>{{2, 3}, {5, 1}, {0, 4}}));
  try {
    io::data::pack_samples({4, 11}, 10);
    ADD_FAILURE() << "a sample longer than a pack must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sample 1 has 11 tokens, more than a pack's 10"), std::string::npos) << e.what();
  }
  // --padded-samples: 10 records, passes padded to multiples of 4 with records 0, 1.
  const auto order = io::data::shuffled_passes(0, 10, 24, 7, 4);
  EXPECT_EQ(std::vector<int64_t>(order.begin() + 10, order.begin() + 12), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.begin() + 10).size(), 10u);
  EXPECT_EQ(std::set<int64_t>(order.begin() + 12, order.begin() + 22).size(), 10u) << "the second pass starts at sample 12";
}

// 24 Alpaca conversations about numbers, byte-level tokens, ChatML, one per sequence or packed
// into sequences of kSeq tokens: PREFIX of the datasets.
constexpr int64_t kSeq = 192;
const std::string kSeqFlag = "--seq-length " + std::to_string(kSeq);

std::string write_numbers(const std::string& dir, const std::string& name, const std::string& flags) {
  std::string lines;
  for (int i = 0; i < 24; ++i) {
    lines += "{\"instruction\": \"Add " + std::to_string(i) + " and " + std::to_string(i % 7) + ".\", \"input\": \"\", \"output\": \"" +
             std::to_string(i + i % 7) + "\"}\n";
  }
  testing::write_file(dir, name + ".jsonl", lines);
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir + "/" + name + ".jsonl --output-prefix " +
                                         dir + "/" + name + " --handler-name AlpacaStyleInstructionHandler --prompt-type chatml " + flags);
  EXPECT_EQ(made.status, 0) << made.output;
  return dir + "/" + name;
}

models::LlamaConfig numbers_model() {
  models::LlamaConfig config = testing::tiny_llama(false, false);
  config.vocab_size = 384;
  config.max_position_embeddings = kSeq + 1;
  return config;
}

// The summed cross-entropy of each conversation's trained labels, keyed by its token ids.
std::map<std::vector<int64_t>, double> conversation_losses(models::LanguageModel& model, const training::data::MicroBatch& batch) {
  const int64_t seq = batch.tokens.size(1) - 1;
  torch::NoGradGuard no_grad;
  const at::Tensor logits = model(Tensors{batch.tokens.narrow(1, 0, seq), {}, batch.position_ids, batch.document_ids})[0];
  const at::Tensor losses = torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), batch.tokens.narrow(1, 1, seq).reshape({-1}), {},
                                                      at::Reduction::None).view({-1, seq}) * batch.loss_mask;
  const at::Tensor documents = batch.document_ids.defined() ? batch.document_ids : torch::ones({batch.tokens.size(0), seq}, torch::kLong);
  std::map<std::vector<int64_t>, double> result;
  for (int64_t b = 0; b < batch.tokens.size(0); ++b) {
    for (int64_t d = 1; d <= documents[b].max().item<int64_t>(); ++d) {
      const at::Tensor in_document = documents[b].eq(d);
      const at::Tensor ids = batch.tokens[b].narrow(0, 0, seq).masked_select(in_document);
      result[std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel())] +=
          losses[b].masked_select(in_document).sum().item<double>();
    }
  }
  return result;
}

TEST(PackedDocuments, PackedConversationsHaveTheLossesTheyHaveOneByOne) {
  const std::string dir = testing::scratch_dir();
  const auto single = io::data::InstructionRecords::open(write_numbers(dir, "single", kSeqFlag));
  const auto packed = io::data::InstructionRecords::open(write_numbers(dir, "packed", kSeqFlag + " --pack"));
  ASSERT_EQ(single.size(), 24);
  ASSERT_LE(packed.size(), 12) << "several conversations to a pack";
  models::LlamaModel model(numbers_model(), torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.2, 3);
  // One conversation a sample: the documents only tell it from its padding.
  const training::data::DocumentBoundaries resets{true, true, false, 256};
  const io::data::InstructionDataset one_by_one(single, 0, 24, kSeq + 1, 256, 7, 24);
  const auto alone = conversation_losses(model, training::data::load_micro_batch(one_by_one, 0, 0, {24, 0, 1}, 257, resets));
  ASSERT_EQ(alone.size(), 24u);
  const io::data::InstructionDataset packs(packed, 0, packed.size(), kSeq + 1, 256, 7, packed.size());
  const training::data::MicroBatch batch = training::data::load_micro_batch(packs, 0, 0, {packed.size(), 0, 1}, 257, resets);
  const auto together = conversation_losses(model, batch);
  ASSERT_EQ(together.size(), 24u);
  for (const auto& [ids, loss] : alone) {
    ASSERT_TRUE(together.count(ids)) << "a conversation is missing from the packs";
    EXPECT_NEAR(together.at(ids), loss, 1e-4 * std::max(1.0, loss));
  }
  // Without the resets the later conversations of a pack see the earlier ones.
  training::data::MicroBatch crossing = batch;
  crossing.position_ids = crossing.document_ids = at::Tensor();
  auto total = [](const std::map<std::vector<int64_t>, double>& losses) {
    double sum = 0;
    for (const auto& entry : losses) sum += entry.second;
    return sum;
  };
  EXPECT_GT(std::abs(total(conversation_losses(model, crossing)) - total(together)), 1e-3);

  // --dataloader-type cyclic keeps the loss mask and the documents of instruction data.
  const auto cyclic = std::make_shared<training::data::CyclicSamples>(std::make_shared<io::data::InstructionDataset>(packs), 4, 1);
  const training::data::MicroBatch drawn = training::data::load_micro_batch(*cyclic, 0, 0, {1, 0, 1}, 257, resets);
  EXPECT_TRUE(drawn.loss_mask.defined());
  EXPECT_GT(drawn.document_ids.max().item<int64_t>(), 1);
}

const std::string kTrainFlags =
    "--model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--tokenizer-type ByteLevelTokenizer " + kSeqFlag + " --micro-batch-size 1 --split 100,0,0 --log-interval 1 --lr 1e-2 "
    "--eval-iters 0 --train-iters 8 --seed 5 --stage sft --is-instruction-dataset ";
const std::string kResets = "--reset-position-ids --reset-attention-mask ";
const std::string kPackedTrain = kTrainFlags + kResets + "--global-batch-size 4 --data-path ";

TEST(PackedDocuments, SameLossesOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string prefix = write_numbers(dir, "packed", kSeqFlag + " --pack");
  const testing::TrainRun one = testing::train(1, kPackedTrain + prefix);
  testing::expect_trained(one, 8);
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the model does not learn";
  testing::expect_same_losses(one, testing::train(2, kPackedTrain + prefix + " --use-torch-fsdp2"), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(4, kPackedTrain + prefix + testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\n")),
                              "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, testing::train(2, kPackedTrain + prefix + " --use-torch-fsdp2 --context-parallel-size 2"),
                              "Ulysses on 2 ranks", 1e-5);
  const testing::TrainRun crossing = testing::train(1, kTrainFlags + "--global-batch-size 4 --data-path " + prefix);
  ASSERT_EQ(crossing.losses.size(), one.losses.size());
  EXPECT_GT(std::abs(crossing.losses[0] - one.losses[0]), 1e-4) << "the resets change the loss";
}

TEST(PackedDocuments, PaddedSamplesAndRefusals) {
  const std::string dir = testing::scratch_dir();
  const std::string prefix = write_numbers(dir, "single", kSeqFlag);
  // 24 conversations, global batches of 5: each pass padded to 25 with conversation 0.
  const testing::TrainRun padded = testing::train(1, kTrainFlags + "--global-batch-size 5 --padded-samples --data-path " + prefix);
  testing::expect_trained(padded, 8);
  EXPECT_NE(padded.result.output.find("--padded-samples: each pass over a split padded with its first conversations to a multiple "
                                      "of the global batch (5)"),
            std::string::npos)
      << padded.result.output;
  const std::string base = "--tokenizer-type ByteLevelTokenizer --micro-batch-size 1 --train-iters 1 --eval-iters 0 --seq-length 16 ";
  const auto token_data = testing::train(1, base + "--mock-data --padded-samples");
  EXPECT_NE(token_data.result.output.find("--padded-samples needs --is-instruction-dataset"), std::string::npos) << token_data.result.output;
  const auto pack_alone = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir +
                                               "/single.jsonl --output-prefix " + dir + "/x --handler-name "
                                               "AlpacaStyleInstructionHandler --prompt-type chatml --pack");
  EXPECT_NE(pack_alone.output.find("--pack needs --seq-length"), std::string::npos) << pack_alone.output;
}

}  // namespace
}  // namespace megacpp
