// Mixture of experts: the llama family with --num-experts is Qwen3-MoE (transformers'
// Qwen3MoeForCausalLM): the same losses on one rank without FSDP, FSDP on 2 and 4 ranks, HSDP
// and with recompute; exported to a Hugging Face folder whose logits an independent NumPy forward
// (tests/reference/hf_forward.py) agrees with, and imported back to train.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::train;
using testing::expect_trained;
using testing::TrainRun;
using testing::fsdp_flags;

// 3 layers: the first and the last a mixture of 8 experts (top 2), the middle one dense.
const std::string kMoe =
    "--model-type llama --qk-layernorm --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 24 "
    "--moe-layer-freq '[1,0,1]' --num-layers 3 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 "
    "--ffn-hidden-size 48 --mock-data --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 4 "
    "--seed 5 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 1e-2 --eval-iters 0 "
    "--train-iters 10";

TEST(MixtureOfExperts, SameLossesOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const TrainRun one = train(1, kMoe);
  expect_trained(one, 10);
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the model does not learn";
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string by_class = fsdp_flags(dir, "class.yaml", "wrap_policy:\n  transformer_layer_cls_to_wrap: [Qwen3MoeDecoderLayer]\n");
  const std::string hsdp = fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  testing::expect_same_losses(one, train(2, kMoe + layers), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kMoe + by_class), "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kMoe + hsdp), "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, train(2, kMoe + layers + " --recompute-granularity full --recompute-method uniform "
                                                            "--recompute-num-layers 1 --init-model-with-meta-device"),
                              "recompute, meta-device init", 1e-5);
}

TEST(MixtureOfExperts, RefusesWhatItCannotComputeByName) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {" --moe-aux-loss-coeff 0.01", "--moe-aux-loss-coeff 0.01: not supported yet (only 0)"},
      {" --moe-router-topk 9", "--moe-router-topk (9) must be in [1, --num-experts (8)]"},
      {" --moe-layer-freq '[1,0]'", "--moe-layer-freq '[1,0]': has 2 entries for 3 layers"},
      {" --moe-z-loss-coeff 0.1", "--moe-z-loss-coeff: not supported: megacpp's mixture of experts reads"},
  };
  // An expert runs only where a token chose it: wrapped alone, its collectives would not line up.
  const std::string dir = testing::scratch_dir();
  cases.push_back({fsdp_flags(dir, "experts.yaml", "sub_modules_to_wrap: ['layers.0.mlp.experts.{*}']\n"),
                   "sub_modules_to_wrap: 'layers.0.mlp.experts.0' is an expert; experts cannot be wrapped one by one yet"});
  for (const auto& [flags, message] : cases) {
    const TrainRun refused = train(1, kMoe + flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << flags << "\n" << refused.result.output;
  }
}

TEST(MixtureOfExperts, ExportsQwen3MoeThatTheNumpyForwardAgreesWithAndImportsBack) {
  const std::string dir = testing::scratch_dir();
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  // Router logits large enough that no token's top-2 is a near tie between fp32 and fp64.
  const TrainRun trained = train(2, kMoe + layers + " --init-method-std 0.2 --save " + dir + "/ckpt --save-interval 10");
  expect_trained(trained, 10);
  const std::string hf = dir + "/hf";
  const auto exported = testing::run_command(MEGACPP_CONVERT_BINARY " export --load " + dir + "/ckpt --output " + hf + " 2>&1");
  ASSERT_EQ(exported.status, 0) << exported.output;
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(hf + "/config.json"));
  EXPECT_EQ(config["model_type"], "qwen3_moe");
  EXPECT_EQ(config["num_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json::array({1}));

  const at::Tensor ours = testing::checkpoint_logits(dir + "/ckpt", testing::reference_tokens());
  const at::Tensor reference = testing::hf_reference_logits(hf, testing::reference_tokens(), ours.size(-1));
  const double diff = (ours - reference).abs().max().item<double>();
  std::cout << "qwen3_moe: max |megacpp - hf_forward.py| = " << diff << " (logits up to " << ours.abs().max().item<double>()
            << ")" << std::endl;
  EXPECT_LE(diff, 1e-4);

  const auto imported = testing::run_command(MEGACPP_CONVERT_BINARY " import --input " + hf + " --save " + dir + "/imported 2>&1");
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_NE(imported.output.find("--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 24 --moe-layer-freq [1,0,1]"),
            std::string::npos)
      << imported.output;
  const TrainRun resumed = train(2, kMoe + layers + " --load " + dir + "/imported");
  expect_trained(resumed, 10);
  EXPECT_LT(resumed.losses.front(), trained.losses.front()) << "the imported weights are the trained ones";
}

}  // namespace
}  // namespace megacpp
