// megacpp-train on real text (Debian's fortunes, byte-level tokens, made into Megatron
// datasets by megacpp-preprocess): the same losses at every world size and mesh, the same run
// from an HDF5 copy of the data, blends, Megatron's validation lines, --exit-interval,
// TensorBoard events that match the log, and bad data input refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::TrainRun;

// The first `count` fortunes of one fortune file, made into a dataset at DIR/NAME (mmap) and
// DIR/NAME.h5 (HDF5). Returns the mmap prefix.
std::string fortune_dataset(const std::string& dir, const std::string& name, const std::string& file) {
  const std::string prefix = dir + "/" + name;
  for (const char* format : {"mmap", "hdf5"}) {
    const std::string output = std::string(format) == "mmap" ? prefix : prefix + "_h5";
    const auto result = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input /usr/share/games/fortunes/" + file +
                                             " --input-format text --document-separator % --append-eod --output-format " +
                                             format + " --output-prefix " + output);
    EXPECT_EQ(result.status, 0) << result.output;
  }
  return prefix + "_text_document";
}

const std::string kRealDataModel =
    "--model-type llama --tokenizer-type ByteLevelTokenizer --seed 1234 --num-layers 2 --hidden-size 32 --num-attention-heads 4 "
    "--ffn-hidden-size 64 --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 8 --log-interval 1 "
    "--lr 3e-3 --lr-warmup-iters 2 --eval-interval 4 --eval-iters 2 --split 90,10,0";

TEST(RealData, SameLossesOnOneRankAndOnFourRanksWhateverTheMesh) {
  const std::string dir = testing::scratch_dir();
  const std::string data = fortune_dataset(dir, "cookie", "cookie");
  const std::string flags = kRealDataModel + " --data-path " + data;
  TrainRun one = testing::train(1, flags);
  ASSERT_EQ(one.result.status, 0) << one.result.output;
  ASSERT_EQ(one.losses.size(), 8u) << one.result.output;
  // Validation after iterations 4 and 8, then at the end of training.
  ASSERT_EQ(one.validation.size(), 3u) << one.result.output;
  EXPECT_EQ(one.validation[0].first, "iteration 4");
  EXPECT_EQ(one.validation[2].first, "the end of training for val data");
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the model does not learn";

  const std::string layers = testing::write_file(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string hsdp = testing::write_file(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  testing::expect_same_losses(one, testing::train(4, flags + " --use-torch-fsdp2 --fsdp2-config-path " + layers), "fsdp4", 1e-5);
  testing::expect_same_losses(one, testing::train(4, flags + " --use-torch-fsdp2 --fsdp2-config-path " + hsdp), "hsdp2x2", 1e-5);
  // Gradient accumulation reads the same global batches in another order.
  testing::expect_same_losses(one, testing::train(2, flags + " --use-torch-fsdp2 --micro-batch-size 1"), "accumulate2", 1e-5);
}

TEST(RealData, Hdf5AndMmapCopiesGiveTheSameRun) {
  const std::string dir = testing::scratch_dir();
  const std::string data = fortune_dataset(dir, "food", "food");
  TrainRun mmap = testing::train(1, kRealDataModel + " --data-path " + data);
  TrainRun hdf5 = testing::train(1, kRealDataModel + " --data-path " + dir + "/food_h5_text_document.h5");
  testing::expect_same_losses(mmap, hdf5, "hdf5", 0.0);
}

TEST(RealData, WeightedBlendDrawsFromEveryDataset) {
  const std::string dir = testing::scratch_dir();
  const std::string a = fortune_dataset(dir, "food", "food"), b = fortune_dataset(dir, "pets", "pets");
  TrainRun blend = testing::train(2, kRealDataModel + " --use-torch-fsdp2 --data-path 0.7 " + a + " 0.3 " + b);
  ASSERT_EQ(blend.result.status, 0) << blend.result.output;
  EXPECT_EQ(blend.losses.size(), 8u);
  EXPECT_NE(blend.result.output.find("data: " + a + ":"), std::string::npos) << blend.result.output;
  EXPECT_NE(blend.result.output.find("data: " + b + ":"), std::string::npos) << blend.result.output;
  TrainRun other = testing::train(2, kRealDataModel + " --use-torch-fsdp2 --data-path 0.3 " + a + " 0.7 " + b);
  ASSERT_EQ(other.result.status, 0) << other.result.output;
  EXPECT_NE(other.losses, blend.losses) << "the blend weights change nothing";
}

TEST(RealData, ValidationExitIntervalAndTensorBoardMatchTheLog) {
  const std::string dir = testing::scratch_dir();
  const std::string data = fortune_dataset(dir, "cookie", "cookie");
  TrainRun run = testing::train(2, kRealDataModel + " --use-torch-fsdp2 --data-path " + data + " --exit-interval 6 --peak-tflops 0.5 " +
                                       "--tensorboard-dir " + dir + "/tb");
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  const std::string& out = run.result.output;
  EXPECT_EQ(run.losses.size(), 6u) << out;
  EXPECT_NE(out.find("exiting program at iteration 6"), std::string::npos) << out;
  ASSERT_EQ(run.validation.size(), 1u) << "only iteration 4 validates; an early exit skips the final one\n" << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"( validation loss at iteration 4 \| lm loss value: [0-9.]+E[-+]\d+ \| lm loss PPL: [0-9.]+E[-+]\d+ \| )")))
      << out;
  EXPECT_NEAR(std::log(std::stod(std::regex_replace(out, std::regex(R"([\s\S]*lm loss PPL: ([0-9.]+E[-+]\d+)[\s\S]*)"), "$1"))),
              run.validation[0].second, 1e-5);
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(TFLOP/s per rank: [0-9.]+ \| MFU: [0-9.]+% \|)"))) << out;
  EXPECT_NE(out.find("samples: train 64, validation 48, test 0"), std::string::npos) << out;

  const auto tb = testing::read_tensorboard(dir + "/tb");
  for (int64_t step = 1; step <= 6; ++step) {
    ASSERT_TRUE(tb.count({"lm loss", step})) << "step " << step;
    EXPECT_NEAR(tb.at({"lm loss", step}), run.losses[static_cast<size_t>(step - 1)], 1e-5 * run.losses[static_cast<size_t>(step - 1)]);
    for (const char* tag : {"learning-rate", "grad-norm", "throughput/tokens-per-second", "throughput/tflops-per-rank",
                            "memory/peak-mb", "memory/state-mb"}) {
      EXPECT_TRUE(tb.count({tag, step})) << tag << " at step " << step;
    }
  }
  EXPECT_FALSE(tb.count({"lm loss", 7}));

  // The stop itself is logged even off the log interval.
  TrainRun sparse = testing::train(1, kRealDataModel + " --data-path " + data + " --exit-interval 6 --log-interval 4");
  ASSERT_EQ(sparse.result.status, 0) << sparse.result.output;
  EXPECT_EQ(sparse.losses.size(), 2u) << sparse.result.output;
  EXPECT_NE(sparse.result.output.find(" iteration        6/       8 |"), std::string::npos) << sparse.result.output;
  ASSERT_TRUE(tb.count({"lm loss validation", 4}));
  EXPECT_NEAR(tb.at({"lm loss validation", 4}), run.validation[0].second, 1e-5 * run.validation[0].second);
}

TEST(RealData, BadDataInputIsRefusedByName) {
  const std::string dir = testing::scratch_dir();
  const std::string data = fortune_dataset(dir, "pets", "pets");
  {
    std::ofstream ids(dir + "/ids.jsonl");
    for (int doc = 0; doc < 200; ++doc) ids << R"({"text": "5 300 999 4 7 1 2 3 8 9"})" << "\n";
  }
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir +
                                         "/ids.jsonl --tokenizer-type NullTokenizer --vocab-size 1000 --output-prefix " + dir + "/ids");
  ASSERT_EQ(made.status, 0) << made.output;
  std::ofstream(dir + "/broken.idx") << "MMIDIDX\0\0 not really";
  std::ofstream(dir + "/broken.bin") << "";
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--data-path " + dir + "/missing", dir + "/missing"},
      {"--data-path " + dir + "/broken", dir + "/broken.idx"},
      {"--data-path 0.5 " + data + " x " + data, "--data-path: weight 'x'"},
      {"--data-path " + data + " --split 9999,1,0", "--split: the validation split of " + data},
      {"--data-path " + data + " --mock-data", "--mock-data and --data-path exclude each other"},
      {"--data-path " + data + " --tokenizer-type GPT2BPETokenizer --vocab-file " + dir + "/none.json --merge-file " + dir +
           "/none.bpe",
       "--vocab-file"},
      {"--data-path " + data + " --tokenizer-type SentencePiece", "--tokenizer-type"},
      {"--data-path " + data + " --eval-interval 0", "--eval-interval must be positive"},
      {"--data-path " + dir + "/ids_text_document", "token id 999 in samples"},
      {"--data-path " + data + " --seq-length 100000 --max-position-embeddings 100000 --train-iters 1000000",
       "fewer than one sample"},
  };
  for (const auto& c : cases) {
    TrainRun run = testing::train(1, kRealDataModel + " " + c.flags);
    EXPECT_NE(run.result.status, 0) << c.flags;
    EXPECT_NE(run.result.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n" << run.result.output;
  }
}

}  // namespace
}  // namespace megacpp
