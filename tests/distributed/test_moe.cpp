// Mixture of experts: the llama family with --num-experts is Qwen3-MoE (transformers'
// Qwen3MoeForCausalLM): the same losses (lm loss and load_balancing_loss) on one rank without
// FSDP, FSDP on 2 and 4 ranks, HSDP, experts wrapped one by one with the expert patch (also where
// some rank routes no token to an expert) and with recompute; exported to a Hugging Face folder whose logits an independent NumPy forward
// (tests/reference/hf_forward.py) agrees with, and imported back to train.
#include <gtest/gtest.h>

#include <chrono>

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

// 3 layers: the first and the last a mixture of 8 experts (top 2), the middle one dense; the
// load-balancing loss in the objective.
const std::string kMoe =
    "--model-type llama --qk-layernorm --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 24 "
    "--moe-layer-freq '[1,0,1]' --moe-aux-loss-coeff 0.01 --num-layers 3 --hidden-size 32 --num-attention-heads 4 "
    "--num-query-groups 2 --ffn-hidden-size 48 --mock-data --tokenizer-type NullTokenizer --vocab-size 99 "
    "--make-vocab-size-divisible-by 4 --seed 5 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 "
    "--log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 10";

// Each expert wrapped as its own group, as MindSpeed names them and as ROLL's wrap_policy does.
const char* const kExpertsMindSpeed = "sub_modules_to_wrap: ['layers.{*}', 'layers.{*}.mlp.experts.{*}']\napply_expert_patch: true\n";
const char* const kExpertsRoll =
    "strategy_config:\n  wrap_policy:\n    transformer_layer_cls_to_wrap: [Qwen3MoeDecoderLayer]\n"
    "    moe_experts: [Qwen3MoeMLP]\n  apply_expert_patch: true\n";

// Megabytes of one expert's parameters, gradients and AdamW state (3 [24, 32] matrices, fp32).
constexpr double kExpertGroupMb = 4.0 * 3 * 24 * 32 * 4 / (1024.0 * 1024.0);

TEST(MixtureOfExperts, SameLossesOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const TrainRun one = train(1, kMoe);
  expect_trained(one, 10);
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the model does not learn";
  ASSERT_EQ(one.balance_losses.size(), 10u) << one.result.output;
  // Megatron's aux_loss: 1 for a perfectly balanced MoE layer, more otherwise; logged as the
  // sum over the 3 layers / 3 (the dense one counts 0).
  for (double b : one.balance_losses) EXPECT_GE(b, 2.0 / 3.0 - 1e-6);
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string roll = fsdp_flags(dir, "roll.yaml", kExpertsRoll);
  const std::string experts = fsdp_flags(dir, "experts.yaml", kExpertsMindSpeed);
  const std::string hsdp = fsdp_flags(dir, "hsdp.yaml", std::string("sharding_size: 2\n") + kExpertsMindSpeed);
  testing::expect_same_losses(one, train(2, kMoe + layers), "FSDP on 2 ranks", 1e-5);
  const TrainRun four = train(4, kMoe + roll);
  testing::expect_same_losses(one, four, "FSDP on 4 ranks, every expert its own group", 1e-5);
  testing::expect_same_losses(one, train(4, kMoe + hsdp), "HSDP 2x2, every expert its own group", 1e-5);
  testing::expect_same_losses(one, train(2, kMoe + experts + testing::kRecomputeOnMetaDevice),
                              "every expert its own group, recompute, meta-device init", 1e-5);

  // Sharded over 4 ranks, each holds about a quarter (parameters, gradients, optimizer state).
  ASSERT_EQ(one.memory.size(), 2u) << one.result.output;  // after the first and the last iteration
  ASSERT_EQ(four.memory.size(), 8u) << four.result.output;
  for (const auto& line : four.memory) {
    EXPECT_LE(line.total(), one.memory[0].total() / 4 + kExpertGroupMb) << one.memory[0].total() << " on 1 rank";
  }

  // The load-balancing loss is part of the objective: without it the model trains otherwise.
  const TrainRun without = train(1, kMoe + " --moe-aux-loss-coeff 0");
  expect_trained(without, 10);
  EXPECT_EQ(without.losses.front(), one.losses.front());
  EXPECT_NE(without.losses.back(), one.losses.back());
}

// Documents of one repeated byte: a sample inside one document routes all its tokens alike, so
// each micro-batch reaches at most 4 of the 8 experts, and which ones differs between ranks.
std::string one_byte_documents(const std::string& dir) {
  std::string text;
  for (char c : std::string("abcdefgh")) text += std::string(400, c) + "\n%\n";
  testing::write_file(dir, "bytes.txt", text);
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir +
                                         "/bytes.txt --input-format text --document-separator % --append-eod "
                                         "--output-prefix " + dir + "/bytes");
  EXPECT_EQ(made.status, 0) << made.output;
  return dir + "/bytes_text_document";
}

TEST(MixtureOfExperts, ExpertsNoTokenChoseOnSomeRanksStillLineUpWithThePatch) {
  const std::string dir = testing::scratch_dir();
  const std::string flags =
      "--model-type llama --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 24 --moe-aux-loss-coeff 0.01 "
      "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --data-path " + one_byte_documents(dir) +
      " --split 100,0,0 --tokenizer-type ByteLevelTokenizer --seed 9 --seq-length 16 --micro-batch-size 1 "
      "--global-batch-size 4 --log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 6";
  const TrainRun one = train(1, flags);
  expect_trained(one, 6);
  const TrainRun patched = train(4, flags + fsdp_flags(dir, "experts.yaml", kExpertsMindSpeed));
  testing::expect_same_losses(one, patched, "4 ranks, every expert its own group, with apply_expert_patch", 1e-5);

  // Without the patch the ranks would wait for each other forever: refused at start-up.
  const auto started = std::chrono::steady_clock::now();
  const TrainRun refused = train(4, flags + fsdp_flags(dir, "unpatched.yaml", "sub_modules_to_wrap: ['layers.{*}.mlp.experts.{*}']\n"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_NE(refused.result.status, 0);
  EXPECT_NE(refused.result.output.find("'layers.0.mlp.experts.0' is an expert wrapped as its own group (sub_modules_to_wrap "
                                       "or wrap_policy.moe_experts): set apply_expert_patch: true"),
            std::string::npos)
      << refused.result.output;
  EXPECT_TRUE(refused.losses.empty());
  std::cout << "refused after " << seconds << " s (process start-up included)" << std::endl;
  EXPECT_LT(seconds, 30.0) << "refused at start-up, not after a hang";
}

TEST(MixtureOfExperts, RefusesWhatItCannotComputeByName) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {" --moe-aux-loss-coeff -0.5", "--moe-aux-loss-coeff must be >= 0"},
      {" --moe-router-topk 9", "--moe-router-topk (9) must be in [1, --num-experts (8)]"},
      {" --moe-layer-freq '[1,0]'", "--moe-layer-freq '[1,0]': has 2 entries for 3 layers"},
      {" --moe-z-loss-coeff 0.1", "--moe-z-loss-coeff: not supported: megacpp's mixture of experts reads"},
  };
  const std::string dir = testing::scratch_dir();
  cases.push_back({fsdp_flags(dir, "experts.yaml", "sub_modules_to_wrap: ['layers.0.mlp.experts.{*}']\n"),
                   "'layers.0.mlp.experts.0' is an expert wrapped as its own group"});
  cases.push_back({fsdp_flags(dir, "class.yaml", "wrap_policy:\n  moe_experts: [Qwen3MoeSparseMoeBlock]\napply_expert_patch: true\n"),
                   "wrap_policy.moe_experts: 'Qwen3MoeSparseMoeBlock' is not an expert class of this model (known: Qwen3MoeMLP)"});
  for (const auto& [flags, message] : cases) {
    const TrainRun refused = train(1, kMoe + flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << flags << "\n" << refused.result.output;
  }
  // Experts but every layer dense: no router, no balancing loss.
  const TrainRun all_dense = train(1, kMoe + " --moe-layer-freq '[0,0,0]' --train-iters 2");
  expect_trained(all_dense, 2);
  EXPECT_TRUE(all_dense.balance_losses.empty()) << all_dense.result.output;
  const TrainRun dense = train(1, "--model-type llama --num-layers 1 --hidden-size 32 --num-attention-heads 4 --mock-data "
                                  "--tokenizer-type NullTokenizer --vocab-size 99 --seq-length 8 --micro-batch-size 1 "
                                  "--global-batch-size 1 --train-iters 1 --eval-iters 0" +
                                      fsdp_flags(dir, "patch.yaml", "apply_expert_patch: true\n"));
  EXPECT_NE(dense.result.status, 0);
  EXPECT_NE(dense.result.output.find("apply_expert_patch: this model has no mixture-of-experts layers"), std::string::npos)
      << dense.result.output;
  const TrainRun coefficient = train(1, "--model-type llama --num-layers 1 --hidden-size 32 --num-attention-heads 4 "
                                        "--mock-data --tokenizer-type NullTokenizer --vocab-size 99 --moe-aux-loss-coeff 0.01");
  EXPECT_NE(coefficient.result.status, 0);
  EXPECT_NE(coefficient.result.output.find("--moe-aux-loss-coeff needs --num-experts > 0"), std::string::npos)
      << coefficient.result.output;
}

TEST(MixtureOfExperts, ExportsQwen3MoeThatTheNumpyForwardAgreesWithAndImportsBack) {
  const std::string dir = testing::scratch_dir();
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  // Router logits large enough that no token's top-2 is a near tie between fp32 and fp64.
  const TrainRun trained = train(2, kMoe + layers + " --moe-router-load-balancing-type transformers --init-method-std 0.2 --save " +
                                        dir + "/ckpt --save-interval 10");
  expect_trained(trained, 10);
  const std::string hf = dir + "/hf";
  const auto exported = testing::convert("export --load " + dir + "/ckpt --output " + hf);
  ASSERT_EQ(exported.status, 0) << exported.output;
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(hf + "/config.json"));
  EXPECT_EQ(config["model_type"], "qwen3_moe");
  EXPECT_EQ(config["num_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["mlp_only_layers"], nlohmann::json::array({1}));

  EXPECT_EQ(config["router_aux_loss_coef"], 0.01);
  EXPECT_EQ(config["output_router_logits"], true);

  std::vector<models::AuxiliaryLoss> auxiliary;
  const at::Tensor ours = testing::checkpoint_logits(dir + "/ckpt", testing::reference_tokens(), &auxiliary);
  double balance = 0;
  const at::Tensor reference = testing::hf_reference_logits(hf, testing::reference_tokens(), ours.size(-1), "hf_forward.py", &balance);
  const double diff = (ours - reference).abs().max().item<double>();
  std::cout << "qwen3_moe: max |megacpp - hf_forward.py| = " << diff << " (logits up to " << ours.abs().max().item<double>()
            << ")" << std::endl;
  EXPECT_LE(diff, 1e-4);
  ASSERT_EQ(auxiliary.size(), 1u);
  std::cout << "load_balancing_loss: megacpp " << auxiliary[0].value << ", hf_forward.py " << balance << std::endl;
  EXPECT_NEAR(auxiliary[0].value, balance, 1e-5 * balance);

  const auto imported = testing::convert("import --input " + hf + " --save " + dir + "/imported");
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_NE(imported.output.find("--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 24 --moe-layer-freq [1,0,1] "
                                 "--moe-aux-loss-coeff 0.01"),
            std::string::npos)
      << imported.output;
  const TrainRun resumed = train(2, kMoe + layers + " --load " + dir + "/imported");
  expect_trained(resumed, 10);
  EXPECT_LT(resumed.losses.front(), trained.losses.front()) << "the imported weights are the trained ones";
}

}  // namespace
}  // namespace megacpp
