#include <gtest/gtest.h>

#include <stdexcept>

#include "megacpp/arguments.h"
#include "megacpp/training/lr_schedule.h"

namespace megacpp {
namespace {

TrainingArguments parse(std::vector<std::string> flags) {
  std::vector<const char*> argv{"megacpp-train"};
  for (auto& f : flags) argv.push_back(f.c_str());
  return parse_arguments(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> flags) {
  try {
    parse(flags);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Arguments, ParsesMegatronFlags) {
  auto a = parse({"--mock-data", "--num-layers", "3", "--hidden-size", "48", "--num-attention-heads", "6",
                  "--num-query-groups", "2", "--seq-length", "32", "--micro-batch-size", "2", "--global-batch-size", "8",
                  "--lr", "3e-4", "--lr-decay-style", "linear", "--untie-embeddings-and-output-weights",
                  "--use-torch-fsdp2", "--init-model-with-meta-device", "--bf16"});
  EXPECT_EQ(a.model.num_layers, 3);
  EXPECT_EQ(a.model.head_dim(), 8);
  EXPECT_EQ(a.model.kv_heads(), 2);
  EXPECT_EQ(a.model.max_position_embeddings, 32);
  EXPECT_FALSE(a.model.tie_embeddings);
  EXPECT_DOUBLE_EQ(a.lr, 3e-4);
  EXPECT_TRUE(a.bf16 && a.use_torch_fsdp2 && a.init_model_with_meta_device);
  EXPECT_EQ(gradient_accumulation_steps(a, 2), 2);
  EXPECT_FALSE(parse({"--mock-data", "--bf16=false"}).bf16);
}

TEST(Arguments, RefusesBadInputNamingTheFlag) {
  EXPECT_NE(error_of({"--mock-data", "--no-such-flag"}).find("no-such-flag"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--num-layers", "two"}).find("num-layers"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--hidden-size", "30", "--num-attention-heads", "4"}).find("--hidden-size (30)"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--num-attention-heads", "4", "--num-query-groups", "3"}).find("--num-query-groups"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--lr-decay-style", "step"}).find("--lr-decay-style"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--bf16"}).find("--bf16 needs --use-torch-fsdp2"), std::string::npos);
  EXPECT_NE(error_of({}).find("--mock-data"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--distributed-timeout-minutes", "99999999999"}).find("--distributed-timeout-minutes"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
  auto a = parse({"--mock-data", "--micro-batch-size", "3", "--global-batch-size", "8"});
  try {
    gradient_accumulation_steps(a, 2);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--global-batch-size (8) must be divisible by --micro-batch-size (3)"), std::string::npos);
  }
}

TEST(Arguments, DataTokenizerAndEvaluationFlags) {
  auto a = parse({"--data-path", "0.7", "/data/a_text_document", "0.3", "/data/b.h5", "--split", "98,2,0",
                  "--eval-interval", "50", "--eval-iters", "4", "--exit-interval", "30", "--peak-tflops", "989",
                  "--tensorboard-dir", "/tmp/tb"});
  EXPECT_EQ(a.data_path, (std::vector<std::string>{"0.7", "/data/a_text_document", "0.3", "/data/b.h5"}));
  EXPECT_EQ(a.split, "98,2,0");
  EXPECT_EQ(a.eval_interval, 50);
  EXPECT_EQ(a.eval_iters, 4);
  EXPECT_EQ(a.exit_interval, 30);
  EXPECT_DOUBLE_EQ(a.peak_tflops, 989);
  EXPECT_EQ(a.tensorboard_dir, "/tmp/tb");
  // The model's vocabulary is the tokenizer's, padded as Megatron pads it.
  EXPECT_EQ(a.tokenizer.type, "ByteLevelTokenizer");
  EXPECT_EQ(a.tokenizer_vocab_size, 257);
  EXPECT_EQ(a.model.vocab_size, 384);
  auto null = parse({"--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--make-vocab-size-divisible-by", "64"});
  EXPECT_EQ(null.tokenizer_vocab_size, 1001);
  EXPECT_EQ(null.model.vocab_size, 1024);
  EXPECT_EQ(parse({"--data-path=x"}).data_path, std::vector<std::string>{"x"});
}

TEST(Arguments, RefusesBadDataFlagsByName) {
  EXPECT_NE(error_of({"--mock-data", "--vocab-size", "100"}).find("--vocab-size is for NullTokenizer"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "NullTokenizer"}).find("--vocab-size"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--data-path", "x"}).find("--mock-data and --data-path"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "Bert"}).find("--tokenizer-type"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "GPT2BPETokenizer"}).find("--vocab-file"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--eval-iters", "-1"}).find("--eval-iters"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--peak-tflops", "fast"}).find("--peak-tflops"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--make-vocab-size-divisible-by", "0"}).find("--make-vocab-size-divisible-by"), std::string::npos);
}

TEST(Arguments, Qwen3ShapeFlags) {
  auto a = parse({"--mock-data", "--hidden-size", "30", "--num-attention-heads", "4", "--kv-channels", "12",
                  "--qk-layernorm"});
  EXPECT_EQ(a.model.head_dim(), 12);
  EXPECT_TRUE(a.model.qk_layernorm);
  EXPECT_FALSE(parse({"--mock-data"}).model.qk_layernorm);
  EXPECT_EQ(parse({"--mock-data"}).model.head_dim(), 16);
  EXPECT_NE(error_of({"--mock-data", "--kv-channels", "-1"}).find("--kv-channels must be >= 0"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--kv-channels", "7"}).find("--kv-channels"), std::string::npos);
}

TEST(LearningRateSchedule, WarmupThenDecay) {
  training::LearningRateSchedule cosine(1.0, 0.1, 2, 10, "cosine");
  EXPECT_DOUBLE_EQ(cosine.at(1), 0.5);
  EXPECT_DOUBLE_EQ(cosine.at(2), 1.0);
  EXPECT_NEAR(cosine.at(6), 0.55, 1e-12);  // halfway: min + (max - min) / 2
  EXPECT_NEAR(cosine.at(10), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(cosine.at(11), 0.1);
  training::LearningRateSchedule linear(1.0, 0.0, 0, 4, "linear");
  EXPECT_DOUBLE_EQ(linear.at(1), 0.75);
  EXPECT_DOUBLE_EQ(linear.at(4), 0.0);
  training::LearningRateSchedule constant(1.0, 0.0, 0, 4, "constant");
  EXPECT_DOUBLE_EQ(constant.at(3), 1.0);
  EXPECT_THROW(training::LearningRateSchedule(1, 0, 0, 4, "step"), std::invalid_argument);
}

}  // namespace
}  // namespace megacpp
