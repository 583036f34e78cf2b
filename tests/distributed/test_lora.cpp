// LoRA (Note [LoRA] in models/lora.h): adapters trained on PEFT's target modules, the rest frozen,
// with the same losses on one rank without FSDP, FSDP on 2 and 4 ranks, HSDP and with recompute
// and meta-device init; only the adapters hold gradients and optimizer state, and the base weights
// come out of training bit for bit as they went in. Dense and mixture-of-experts models alike.
#include <gtest/gtest.h>

#include <regex>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/lora.h"
#include "tests/support/distributed_test.h"
#include "tests/support/lora_runs.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::expect_trained;
using testing::fsdp_flags;
using testing::train;
using testing::TrainRun;

const std::string kWithAdapters = testing::kLoraTestModel + "--lr 1e-2" + testing::kLoraTestAdapters;

TEST(Lora, SameLossesOnEveryLayoutOnlyAdaptersTrain) {
  const std::string dir = testing::scratch_dir();
  const TrainRun one = train(1, kWithAdapters + " --dump-final-params " + dir + "/trained.pt");
  expect_trained(one, 10);
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the adapters do not learn";
  EXPECT_NE(one.result.output.find("lora: rank 4, alpha 8, dropout 0 on 14 Linear layer(s)"), std::string::npos)
      << one.result.output;
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string by_class = fsdp_flags(dir, "class.yaml", "wrap_policy:\n  transformer_layer_cls_to_wrap: [Qwen3DecoderLayer]\n");
  const std::string hsdp = fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  testing::expect_same_losses(one, train(2, kWithAdapters + layers), "FSDP on 2 ranks", 1e-5);
  const TrainRun four = train(4, kWithAdapters + by_class);
  testing::expect_same_losses(one, four, "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kWithAdapters + hsdp), "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, train(2, kWithAdapters + layers + testing::kRecomputeOnMetaDevice),
                              "recompute, meta-device init", 1e-5);

  // The base weights are as initialized (a run that does not move them: --lr 0), bit for bit;
  // the adapters moved.
  ASSERT_EQ(train(1, kWithAdapters + " --lr 0 --dump-final-params " + dir + "/initial.pt").result.status, 0);
  const auto initial = testing::read_tensor_dict(dir + "/initial.pt"), trained = testing::read_tensor_dict(dir + "/trained.pt");
  ASSERT_EQ(initial.size(), trained.size());
  int64_t adapter_numel = 0;
  for (const auto& [name, tensor] : initial) {
    const bool adapter = models::is_lora_parameter(name);
    EXPECT_EQ(tensor.equal(trained.at(name)), !adapter) << name;
    if (adapter) adapter_numel += tensor.numel();
  }
  EXPECT_EQ(adapter_numel, 2 * (4 * 32 + 32 * 4 + 2 * (4 * 32 + 16 * 4) + 4 * 32 + 32 * 4 + 2 * (4 * 32 + 48 * 4) + 4 * 48 + 32 * 4))
      << "rank 4 on q, k, v, o, gate, up and down of 2 layers";

  // Gradients and AdamW's two moments exist for the adapters only (fp32), on every layout.
  const double adapters_mb = static_cast<double>(adapter_numel) * 4 / (1024.0 * 1024.0);
  ASSERT_FALSE(one.memory.empty()) << one.result.output;
  for (const auto& line : one.memory) {
    EXPECT_NEAR(line.grads, adapters_mb, 1e-3);
    EXPECT_NEAR(line.optimizer_state, 2 * adapters_mb, 1e-3);
  }
  ASSERT_EQ(four.memory.size(), 8u);
  for (const auto& line : four.memory) EXPECT_LE(line.optimizer_state, 2 * adapters_mb / 4 + 1e-3) << "a quarter each";
}

// MindSpeed-LLM's scripts name Megatron's fused layers: the same adapters as the Hugging Face
// modules they hold (each module its own A and B; Megatron's fused linear_qkv shares one A).
TEST(Lora, MegatronModuleNamesAdaptTheModulesTheyHold) {
  const std::string base = testing::kLoraTestModel + "--lr 1e-2 --lora-rank 4 --lora-alpha 8 --lora-target-modules ";
  const TrainRun megatron = train(1, base + "linear_qkv linear_proj linear_fc1 linear_fc2");
  expect_trained(megatron, 10);
  for (const char* line : {"lora: linear_qkv (Megatron's name) adapts self_attn.q_proj, self_attn.k_proj, self_attn.v_proj",
                           "lora: linear_fc1 (Megatron's name) adapts gate_proj, up_proj", "on 14 Linear layer(s)"}) {
    EXPECT_NE(megatron.result.output.find(line), std::string::npos) << line << "\n" << megatron.result.output;
  }
  testing::expect_same_losses(train(1, base + "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"), megatron,
                              "Megatron's names", 0.0);
}

TEST(Lora, MixtureOfExpertsAdaptersOnEveryExpert) {
  const std::string moe = testing::kLoraTestModel + "--lr 1e-2 --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 24 "
                                   "--moe-aux-loss-coeff 0.01 --lora-rank 2 --lora-target-modules q_proj gate_proj";
  const TrainRun one = train(1, moe);
  expect_trained(one, 10);
  EXPECT_NE(one.result.output.find("on 10 Linear layer(s)"), std::string::npos) << "q_proj and 4 experts' gate_proj, 2 layers\n"
                                                                                 << one.result.output;
  const std::string dir = testing::scratch_dir();
  testing::expect_same_losses(one, train(2, moe + fsdp_flags(dir, "experts.yaml",
                                                               "sub_modules_to_wrap: ['layers.{*}', 'layers.{*}.mlp.experts.{*}']\n"
                                                               "apply_expert_patch: true\n")),
                              "FSDP on 2 ranks, every expert its own group", 1e-5);
}

TEST(Lora, RefusesWhatItCannotAdaptByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --lora-rank 4 --lora-target-modules nope",
       "--lora-target-modules: 'nope' matches no Linear layer of the model (its Linear layers: down_proj, gate_proj, k_proj, "
       "lm_head, o_proj, q_proj, up_proj, v_proj, or all-linear, linear_fc1, linear_fc2, linear_proj, linear_qkv (Megatron's "
       "names))"},
      {" --lora-rank 4 --lora-target-modules mlp", "--lora-target-modules: 'mlp' names 'layers.0.mlp', which is not a Linear layer"},
      {" --lora-rank 4", "--lora-target-modules: name the modules to adapt"},
      {" --lora-target-modules q_proj", "--lora-target-modules needs --lora-rank > 0"},
      {" --lora-alpha 16", "--lora-alpha needs --lora-rank > 0"},
      {" --lora-rank 4 --lora-dropout 1 --lora-target-modules q_proj", "--lora-dropout must be in [0, 1)"},
      {" --lora-rank 4 --lora-r 8 --lora-target-modules q_proj", "--lora-r and --lora-rank differ; give one"},
  };
  for (const auto& [flags, message] : cases) {
    const TrainRun refused = train(1, testing::kLoraTestModel + "--untie-embeddings-and-output-weights" + flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << flags << "\n" << refused.result.output;
  }
}

// PEFT's disable_adapter(): while an AdaptersDisabled lives the LoRA model computes the forward of
// a model without adapters from the same base weights; the adapters are back when it goes.
TEST(Lora, DisabledAdaptersLeaveTheBaseModelsForward) {
  auto build = [] {
    auto model = std::make_shared<models::LlamaModel>(testing::tiny_llama(false, false), torch::TensorOptions().dtype(torch::kFloat));
    model->init_weights(0.2, 7);
    return model;
  };
  const auto base = build(), adapted = build();
  models::apply_lora(*adapted, {4, 8.0, 0.0, {"all-linear"}});
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (auto& item : adapted->named_parameters()) {
    if (models::is_lora_parameter(item.key())) item.value().normal_(0, 0.1);  // lora_B too: adapters that change the output
  }
  const at::Tensor ids = torch::randint(50, {2, 6}, torch::kLong);
  const at::Tensor with_adapters = (*adapted)(ids), without = (*base)(ids);
  EXPECT_GT((with_adapters - without).abs().max().item<double>(), 1e-3) << "the adapters should change the logits";
  {
    const models::AdaptersDisabled off(*adapted);
    EXPECT_TRUE(torch::allclose((*adapted)(ids), without, 1e-6, 1e-6));
  }
  EXPECT_TRUE(torch::equal((*adapted)(ids), with_adapters));
}

}  // namespace
}  // namespace megacpp
