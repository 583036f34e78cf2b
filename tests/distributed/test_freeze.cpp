// Freezing modules by prefix (models/freeze.h): ROLL's model_args.freeze_module_prefix in the
// YAML or --freeze-module-prefix. The frozen parameters come out of training bit for bit as they
// went in, hold no gradient and no optimizer state (memory line), and the losses are the same on
// one rank without FSDP, FSDP on 2 and 4 ranks and HSDP.
#include <gtest/gtest.h>

#include <regex>

#include "tests/support/distributed_test.h"
#include "tests/support/lora_runs.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::fsdp_flags;
using testing::train;
using testing::TrainRun;

const std::string kFreezeModel = testing::kLoraTestModel + "--lr 1e-2 --untie-embeddings-and-output-weights ";

bool frozen(const std::string& name) { return name.rfind("layers.0.", 0) == 0 || name.rfind("embed_tokens.", 0) == 0; }

TEST(Freeze, FrozenPrefixesStayAsTheyWereOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string flag = " --freeze-module-prefix layers.0,embed_tokens";
  const TrainRun one = train(1, kFreezeModel + flag + " --dump-final-params " + dir + "/trained.pt");
  testing::expect_trained(one, 10);
  EXPECT_NE(one.result.output.find("freeze: layers.0, embed_tokens ("), std::string::npos) << one.result.output;
  const std::string by_roll = fsdp_flags(dir, "roll.yaml",
                                         "model_args:\n  freeze_module_prefix: layers.0, embed_tokens\nstrategy_args:\n"
                                         "  strategy_name: fsdp2_train\n  strategy_config:\n    fsdp_size: 2\n");
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}', embed_tokens]\n");
  const std::string hsdp = fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  testing::expect_same_losses(one, train(2, kFreezeModel + by_roll), "ROLL's model_args on 2 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kFreezeModel + flag + layers + " --dump-final-params " + dir + "/four.pt"),
                              "FSDP on 4 ranks, frozen groups of their own", 1e-5);
  testing::expect_same_losses(one, train(4, kFreezeModel + flag + hsdp), "HSDP 2x2", 1e-5);

  // Bit for bit as initialized (a run with --lr 0 has the initial weights); the rest moved.
  ASSERT_EQ(train(1, kFreezeModel + flag + " --lr 0 --dump-final-params " + dir + "/initial.pt").result.status, 0);
  const auto initial = testing::read_tensor_dict(dir + "/initial.pt"), trained = testing::read_tensor_dict(dir + "/trained.pt");
  const auto sharded = testing::read_tensor_dict(dir + "/four.pt");  // gathered from 4 ranks' shards
  int64_t trainable = 0;
  for (const auto& [name, tensor] : initial) {
    EXPECT_EQ(tensor.equal(trained.at(name)), frozen(name)) << name;
    EXPECT_EQ(tensor.equal(sharded.at(name)), frozen(name)) << name << " (FSDP on 4 ranks)";
    if (!frozen(name)) trainable += tensor.numel();
  }
  // AdamW's two moments for the trainable parameters only; unfrozen, for all of them.
  ASSERT_FALSE(one.memory.empty()) << one.result.output;
  EXPECT_NEAR(one.memory[0].optimizer_state, 2.0 * trainable * 4 / (1024 * 1024), 1e-3);
  const TrainRun unfrozen = train(1, kFreezeModel);
  ASSERT_FALSE(unfrozen.memory.empty()) << unfrozen.result.output;
  EXPECT_GT(unfrozen.memory[0].optimizer_state, one.memory[0].optimizer_state + 0.01);
}

// A checkpoint saved with parameters frozen holds no optimizer state for them: resuming with them
// trained says so and how to go on; with --no-load-optim it resumes.
TEST(Freeze, ResumingWithFewerFrozenNamesTheMissingState) {
  const std::string dir = testing::scratch_dir();
  ASSERT_EQ(train(1, kFreezeModel + "--train-iters 2 --freeze-module-prefix layers.0 --save " + dir + "/ckpt").result.status, 0);
  const TrainRun refused = train(1, kFreezeModel + "--train-iters 3 --load " + dir + "/ckpt");
  EXPECT_NE(refused.result.status, 0);
  EXPECT_TRUE(std::regex_search(refused.result.output,
                                std::regex(R"(holds no optimizer state for layers\.0\.[a-z_.]+weight, which this run trains \(was )"
                                           R"(it frozen when saved\?\): add --no-load-optim)")))
      << refused.result.output;
  const TrainRun resumed = train(1, kFreezeModel + "--train-iters 3 --load " + dir + "/ckpt --no-load-optim");
  testing::expect_trained(resumed, 1);
}

TEST(Freeze, RefusesPrefixesThatFreezeNothingOrEverything) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --freeze-module-prefix layer",
       "freeze_module_prefix: 'layer' names no parameter of the model (its top-level modules: embed_tokens, layers, norm, lm_head)"},
      {" --freeze-module-prefix embed_tokens,layers,norm,lm_head", "leaves no parameter to train"},
  };
  for (const auto& [flags, message] : cases) {
    const TrainRun refused = train(1, kFreezeModel + flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << flags << "\n" << refused.result.output;
  }
}

}  // namespace
}  // namespace megacpp
