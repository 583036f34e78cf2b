// LoRA checkpoints and export (Note [LoRA] in models/lora.h): --save writes the adapters and
// their optimizer state (the frozen base only with --lora-save-base); a base checkpoint without
// adapters starts them fresh at iteration 0; --lora-load (or --load of a checkpoint holding both)
// resumes them exactly where an uninterrupted run would be, on any layout. megacpp-convert writes
// the adapters as PEFT's folder (names and shapes checked against a hand-written list), or merged
// into a plain Hugging Face folder whose logits are the adapted model's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "checkpoint/checkpoint_reader.h"
#include "models/lora.h"
#include "io/serialization/safetensors.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/lora_runs.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::expect_trained;
using testing::train;
using testing::TrainRun;

const std::string kBaseModel = testing::kLoraTestModel + "--lr 1e-2 ";
const std::string kBaseWithAdapters = kBaseModel + testing::kLoraTestAdapters;

// A plain (not LoRA) checkpoint of two iterations: the base model LoRA starts from.
std::string train_base(const std::string& dir) {
  const TrainRun base = train(1, kBaseModel + "--train-iters 2 --save " + dir + "/base");
  EXPECT_EQ(base.result.status, 0) << base.result.output;
  return dir + "/base";
}

// `resumed` logged iterations from + 1 .. from + count of `whole`, with the same losses.
void expect_losses_of(const TrainRun& whole, const TrainRun& resumed, size_t from, size_t count, const std::string& what) {
  ASSERT_EQ(resumed.losses.size(), count) << what << "\n" << resumed.result.output;
  for (size_t i = 0; i < resumed.losses.size(); ++i) {
    EXPECT_NEAR(resumed.losses[i], whole.losses[from + i], 1e-5 * std::abs(whole.losses[from + i])) << what << ", iteration " << from + i + 1;
  }
}

bool contains(const TrainRun& run, const std::string& text) { return run.result.output.find(text) != std::string::npos; }

TEST(LoraCheckpoint, AdaptersSavedAloneAndResumedOnAnyLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string base = train_base(dir), adapters = dir + "/adapters", full = dir + "/full";
  const TrainRun whole = train(1, kBaseWithAdapters + " --load " + base + " --save " + adapters + " --save-interval 5");
  expect_trained(whole, 10);
  EXPECT_TRUE(contains(whole, "holds no adapters; they start fresh, at iteration 0")) << whole.result.output;

  // The adapters' checkpoint: adapters and their AdamW moments (and RNG states), no base weight.
  auto reader = checkpoint::CheckpointReader::open(adapters, 5);
  ASSERT_TRUE(reader);
  const auto format = reader->format();
  const std::string adapter = "layers.1.mlp.down_proj.lora_B.weight";
  EXPECT_TRUE(reader->tensors().has(format.model_key(adapter)));
  EXPECT_TRUE(reader->tensors().has(io::checkpoint::flat_key(format.optimizer_state(adapter, "exp_avg_sq"))));
  size_t adapter_keys = 0;
  for (const auto& key : reader->tensors().metadata().keys()) {
    if (key.rfind("rng_state.", 0) == 0) continue;
    EXPECT_TRUE(models::is_lora_parameter(key)) << "a base tensor in the adapters' checkpoint: " << key;
    adapter_keys += key == format.model_key(key.substr(key.find("layers."))) ? 1 : 0;
  }
  EXPECT_EQ(adapter_keys, 28u) << "q, k, v, o, gate, up, down of 2 layers, lora_A and lora_B";

  // Resumed from iteration 5, on 2 ranks with FSDP and on 4 with HSDP: iterations 6-10 as the whole run.
  const std::string resume = kBaseWithAdapters + " --load " + base + " --lora-load " + adapters + " --ckpt-step 5";
  const TrainRun fsdp = train(2, resume + testing::fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n"));
  EXPECT_TRUE(contains(fsdp, "resuming at iteration 5")) << fsdp.result.output;
  expect_losses_of(whole, fsdp, 5, 5, "--lora-load on 2 ranks (FSDP)");

  // With --lora-save-base the checkpoint holds the base too, and --load alone resumes from it.
  const TrainRun first = train(1, kBaseWithAdapters + " --load " + base + " --save " + full + " --lora-save-base --save-interval 5 --exit-interval 5");
  ASSERT_EQ(first.result.status, 0) << first.result.output;
  expect_losses_of(whole, first, 0, 5, "the first half, saved with the base");
  auto with_base = checkpoint::CheckpointReader::open(full, std::nullopt);
  EXPECT_TRUE(with_base->tensors().has(with_base->format().model_key("layers.0.self_attn.q_proj.weight")));
  const TrainRun hsdp = train(4, kBaseWithAdapters + " --load " + full +
                                     testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n"));
  expect_losses_of(whole, hsdp, 5, 5, "--load of adapters saved with their base, HSDP 2x2");
  const TrainRun own_base = train(1, kBaseWithAdapters + " --lora-load " + full);
  EXPECT_TRUE(contains(own_base, "loading the base model from " + full)) << own_base.result.output;
  expect_losses_of(whole, own_base, 5, 5, "--lora-load alone of adapters saved with their base");

  // What cannot be resumed is refused by name.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {kBaseWithAdapters + " --load " + adapters, "holds LoRA adapters without their base model (saved without --lora-save-base): give the "
                                      "base model's checkpoint to --load and this one to --lora-load"},
      {kBaseWithAdapters + " --lora-alpha 16 --load " + base + " --lora-load " + adapters,
       "the adapters were trained with --lora-rank 4 --lora-alpha 8; this run has --lora-rank 4 --lora-alpha 16"},
      {kBaseWithAdapters + " --load " + base + " --lora-load " + base, "--lora-load " + base + ": the checkpoint holds no LoRA adapters"},
      {kBaseModel + " --lora-rank 4 --lora-alpha 8 --lora-target-modules q_proj --load " + base + " --lora-load " + adapters,
       "the adapters were trained on --lora-target-modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj (14 layers); "
       "this run adapts q_proj (2 layers)"},
      {kBaseWithAdapters + " --lora-save-base", "--lora-save-base needs --save"},
      {kBaseModel + " --lora-load " + adapters, "--lora-load needs --lora-rank > 0"},
  };
  for (const auto& [flags, message] : refused) {
    const TrainRun run = train(1, flags);
    EXPECT_NE(run.result.status, 0) << flags;
    EXPECT_TRUE(contains(run, message)) << flags << "\n" << run.result.output;
  }
}

// The names and shapes PEFT writes for target_modules ["model.layers.0.self_attn.q_proj",
// "v_proj", "down_proj"], rank 4, on this Qwen3-style model (hidden 32, 4 heads and 2 KV heads of
// 8, MLP 48, 2 layers).
const std::map<std::string, std::vector<int64_t>> kPeftTensors = {
    {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", {4, 32}},
    {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", {32, 4}},
    {"base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", {4, 32}},
    {"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", {16, 4}},
    {"base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", {4, 48}},
    {"base_model.model.model.layers.0.mlp.down_proj.lora_B.weight", {32, 4}},
    {"base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight", {4, 32}},
    {"base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight", {16, 4}},
    {"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight", {4, 48}},
    {"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight", {32, 4}},
};

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(LoraCheckpoint, ExportsPeftFolderAndMergedModel) {
  const std::string dir = testing::scratch_dir();
  const std::string base = train_base(dir), adapters = dir + "/adapters";
  const TrainRun run = train(1, kBaseModel + "--lora-rank 4 --lora-alpha 8 --lora-target-modules layers.0.self_attn.q_proj v_proj down_proj --load " + base +
                                    " --save " + adapters);
  expect_trained(run, 10);

  const auto peft = testing::convert("export --load " + adapters + " --output " + dir + "/peft --base-model tiny-qwen3");
  ASSERT_EQ(peft.status, 0) << peft.output;
  EXPECT_NE(peft.output.find("exported 5 LoRA adapters (rank 4, Float)"), std::string::npos) << peft.output;
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(dir + "/peft/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8);
  EXPECT_EQ(config["lora_dropout"], 0.0);
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["base_model_name_or_path"], "tiny-qwen3");
  // q_proj of layer 0 only: by its full name, so that PEFT does not adapt layer 1's too.
  EXPECT_EQ(config["target_modules"], nlohmann::json({"down_proj", "model.layers.0.self_attn.q_proj", "v_proj"}));
  const auto file = io::serialization::SafetensorsFile::open(dir + "/peft/adapter_model.safetensors");
  EXPECT_EQ(file.metadata(), (io::serialization::SafetensorsMetadata{{"format", "pt"}}));
  std::map<std::string, std::vector<int64_t>> written;
  for (const auto& name : file.names()) {
    written[name] = file.tensor(name).shape;
    EXPECT_EQ(file.tensor(name).dtype, "F32") << name;
  }
  EXPECT_EQ(written, kPeftTensors);

  // Three forwards agree: megacpp's adapted model, NumPy's base with PEFT's adapters applied as PEFT
  // does, and NumPy's merged folder; the adapters moved the logits.
  for (const std::string& flags : {"--load " + base + " --output " + dir + "/base_hf",
                                   "--load " + base + " --lora-load " + adapters + " --merge-lora --output " + dir + "/merged"}) {
    const auto exported = testing::convert("export " + flags);
    ASSERT_EQ(exported.status, 0) << flags << "\n" << exported.output;
  }
  const auto& tokens = testing::reference_tokens();
  const at::Tensor ours = testing::checkpoint_logits(adapters, tokens, nullptr, base);
  const int64_t vocab = ours.size(-1);
  const at::Tensor with_peft = testing::hf_reference_logits(dir + "/base_hf", tokens, vocab, "hf_forward.py", nullptr, dir + "/peft");
  const at::Tensor merged = testing::hf_reference_logits(dir + "/merged", tokens, vocab);
  const at::Tensor plain = testing::hf_reference_logits(dir + "/base_hf", tokens, vocab);
  std::cout << "max |megacpp - base + PEFT| = " << max_diff(ours, with_peft) << ", |merged - base + PEFT| = " << max_diff(merged, with_peft)
            << ", the adapters' effect " << max_diff(plain, with_peft) << std::endl;
  EXPECT_LE(max_diff(ours, with_peft), 1e-4);
  EXPECT_LE(max_diff(merged, with_peft), 1e-4);
  EXPECT_GT(max_diff(plain, with_peft), 1e-2) << "the trained adapters should change the logits";

  const std::vector<std::pair<std::string, std::string>> refused = {
      {"export --load " + adapters + " --merge-lora --output " + dir + "/x",
       "LoRA adapters saved without --lora-save-base hold no base model: give the base model's checkpoint with --load and the "
       "adapters' with --lora-load"},
      {"export --load " + base + " --merge-lora --output " + dir + "/x", "--merge-lora: --load " + base + " holds no LoRA adapters"},
  };
  for (const auto& [args, message] : refused) {
    const auto result = testing::convert(args);
    EXPECT_NE(result.status, 0) << args;
    EXPECT_NE(result.output.find(message), std::string::npos) << args << "\n" << result.output;
  }
}

// Qwen3-MoE: adapters on every expert's gate_proj (and q_proj), saved with their base; the merged
// folder and the base with PEFT's adapters give the adapted model's logits.
TEST(LoraCheckpoint, ExportsMixtureOfExpertsAdapters) {
  const std::string dir = testing::scratch_dir();
  const std::string moe = kBaseModel + "--num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 24 ";
  ASSERT_EQ(train(1, moe + "--train-iters 2 --save " + dir + "/base").result.status, 0);
  const TrainRun run = train(1, moe + "--lora-rank 2 --lora-alpha 4 --lora-target-modules q_proj gate_proj --load " + dir +
                                    "/base --save " + dir + "/full --lora-save-base");
  expect_trained(run, 10);
  for (const std::string& flags : {"--load " + dir + "/base --output " + dir + "/base_hf",
                                   "--load " + dir + "/full --output " + dir + "/peft",
                                   "--load " + dir + "/full --merge-lora --output " + dir + "/merged"}) {
    const auto exported = testing::convert("export " + flags);
    ASSERT_EQ(exported.status, 0) << flags << "\n" << exported.output;
  }
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(dir + "/peft/adapter_config.json"));
  EXPECT_EQ(config["target_modules"], nlohmann::json({"gate_proj", "q_proj"})) << "every expert's gate_proj, not the router";
  EXPECT_TRUE(io::serialization::SafetensorsFile::open(dir + "/peft/adapter_model.safetensors")
                  .contains("base_model.model.model.layers.1.mlp.experts.3.gate_proj.lora_B.weight"));
  const auto& tokens = testing::reference_tokens();
  const at::Tensor ours = testing::checkpoint_logits(dir + "/full", tokens);
  const int64_t vocab = ours.size(-1);
  const at::Tensor with_peft = testing::hf_reference_logits(dir + "/base_hf", tokens, vocab, "hf_forward.py", nullptr, dir + "/peft");
  const at::Tensor merged = testing::hf_reference_logits(dir + "/merged", tokens, vocab);
  std::cout << "Qwen3-MoE: max |megacpp - base + PEFT| = " << max_diff(ours, with_peft) << ", |merged - base + PEFT| = "
            << max_diff(merged, with_peft) << std::endl;
  EXPECT_LE(max_diff(ours, with_peft), 1e-4);
  EXPECT_LE(max_diff(merged, with_peft), 1e-4);
}

}  // namespace
}  // namespace megacpp
