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
