// megacpp-train end to end with ROLL-style fsdp2 configs (configs/fsdp2/*): the same losses as
// the equivalent MindSpeed-style config, and ROLL keys megacpp lacks refused by name.
#include <gtest/gtest.h>

#include "tests/support/train_run.h"

namespace megacpp {
namespace {

const std::string kRollFlags =
    "--model-type llama --mock-data --seed 1234 --num-layers 2 --hidden-size 40 --num-attention-heads 4 --num-query-groups 2 "
    "--ffn-hidden-size 62 --tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --seq-length 16 "
    "--micro-batch-size 2 --global-batch-size 8 --train-iters 6 --log-interval 1 --lr 2e-3 --lr-warmup-iters 2 "
    "--use-torch-fsdp2";

std::string shipped(const std::string& name) { return std::string(MEGACPP_SOURCE_DIR) + "/configs/fsdp2/" + name; }

testing::TrainRun train_with(int ranks, const std::string& config, const std::string& extra = "") {
  return testing::train(ranks, kRollFlags + " --fsdp2-config-path " + config + " " + extra);
}

using testing::TrainRun;

void expect_same_losses(const TrainRun& mindspeed, const TrainRun& roll, double rtol) {
  ASSERT_EQ(mindspeed.losses.size(), 6u) << mindspeed.result.output;
  testing::expect_same_losses(mindspeed, roll, "ROLL config vs MindSpeed config", rtol);
}

TEST(RollConfig, SameLossesAsTheMindSpeedConfigOnTwoRanks) {
  // roll_strategy.yaml is llama_layers.yaml in ROLL's strategy_args layout, without prefetch
  // (which does not change the math).
  TrainRun mindspeed = train_with(2, shipped("llama_layers.yaml"));
  TrainRun roll = train_with(2, shipped("roll_strategy.yaml"));
  expect_same_losses(mindspeed, roll, 1e-5);
  EXPECT_NE(roll.result.output.find("wrap by class [LlamaDecoderLayer]"), std::string::npos) << roll.result.output;
  EXPECT_NE(roll.result.output.find("wrap 2 module(s)"), std::string::npos) << roll.result.output;
}

TEST(RollConfig, SameLossesAsTheMindSpeedConfigUnderHsdpBf16) {
  TrainRun mindspeed = train_with(4, shipped("hsdp_bf16_mindspeed.yaml"));
  TrainRun roll = train_with(4, shipped("hsdp_bf16_roll.yaml"));
  expect_same_losses(mindspeed, roll, 1e-6);
  EXPECT_NE(roll.result.output.find("HSDP (ddp=2, fsdp=2)"), std::string::npos) << roll.result.output;
  EXPECT_NE(roll.result.output.find("wrap 2 module(s)"), std::string::npos) << roll.result.output;
}

TEST(RollConfig, WhatMegacppLacksIsRefusedByName) {
  const std::string dir = testing::scratch_dir();
  auto write = [&](const std::string& name, const std::string& text) { return testing::write_file(dir, name, text); };
  struct Case {
    std::string config, extra, message;
  };
  const std::vector<Case> cases = {
      {write("offload.yaml", "strategy_config:\n  fsdp_size: 2\n  offload_policy: true\n"), "",
       "offload_to_cpu / offload_policy in " + dir + "/offload.yaml: CPU offload needs a CUDA device; this run computes on cpu"},
      {write("qwen3.yaml", "wrap_policy:\n  transformer_layer_cls_to_wrap: [Qwen3DecoderLayer]\n"), "",
       "'Qwen3DecoderLayer' is not a module class of this model (known: LlamaDecoderLayer)"},
      {write("lm_output.yaml", "wrap_policy:\n  wrap_lm_output: true\n"), "",
       "wrap_lm_output: this model has no output layer module of its own"},
      {write("both.yaml", "fsdp_size: 2\nsharding_size: 2\n"), "", "key 'fsdp_size': also given as 'sharding_size'"},
  };
  for (const auto& c : cases) {
    TrainRun run = train_with(1, c.config, c.extra);
    EXPECT_NE(run.result.status, 0) << c.config;
    EXPECT_NE(run.result.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n"
                                                                     << run.result.output;
  }
  // With untied embeddings the output layer can be its own group.
  TrainRun untied = train_with(1, cases[2].config, "--untie-embeddings-and-output-weights");
  EXPECT_EQ(untied.result.status, 0) << untied.result.output;
  EXPECT_NE(untied.result.output.find("sub_modules_to_wrap [layers.{*}, lm_head]"), std::string::npos)
      << untied.result.output;
}

}  // namespace
}  // namespace megacpp
