// megacpp-convert end to end: a checkpoint trained on 2 ranks, exported to a Hugging Face
// folder, gives the same logits in the independent NumPy forward pass as megacpp's model with
// the checkpoint's weights; bf16 export -> import -> export gives the same files; an imported
// folder trains; bad folders are refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <torch/torch.h>

#include "checkpoint/checkpoint_reader.h"
#include "models/llama/llama_hf.h"
#include "models/llama/llama_model.h"
#include "tests/support/hf_reference.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;

const std::string kTrain =
    "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 4 --seed 3 "
    "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--seq-length 16 --micro-batch-size 2 --global-batch-size 4 --log-interval 1 --lr 1e-2 --eval-iters 0 "
    "--train-iters 3 --use-torch-fsdp2";

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// megacpp's logits for reference_tokens() with the weights of checkpoint `root` (the model built from the
// exported config.json, so the config is checked too; Hugging Face has no zero-centered norms,
// so `layernorm_1p` says whether the checkpoint's have them).
at::Tensor megacpp_logits(const std::string& root, const std::string& hf_dir, bool layernorm_1p) {
  std::ifstream config_file(hf_dir + "/config.json");
  models::LlamaConfig config = models::llama_config_from_hf(nlohmann::json::parse(config_file), hf_dir + "/config.json");
  config.apply_layernorm_1p = layernorm_1p;
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  auto reader = checkpoint::CheckpointReader::open(root, std::nullopt);
  const std::string prefix = reader->format() == checkpoint::CheckpointFormat::torch_dcp() ? "model." : "";
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(reader->tensors().read_tensor(prefix + item.key()));
  return model(testing::token_ids(testing::reference_tokens())).detach();
}

TEST(Convert, ExportedFolderGivesMegacppsLogits) {
  const std::string dir = testing::scratch_dir();
  // llama-1p: Megatron's --apply-layernorm-1p, whose norm weights Hugging Face stores plus 1.
  for (const std::string variant : {"llama", "qwen3", "llama-1p"}) {
    const std::string extra = variant == "qwen3"      ? " --qk-layernorm --kv-channels 12 --ckpt-format torch_dist"
                              : variant == "llama-1p" ? " --apply-layernorm-1p --qk-layernorm --ckpt-format torch_dist"
                                                      : " --untie-embeddings-and-output-weights --ckpt-format torch_dcp";
    const std::string root = dir + "/" + variant;
    auto run = testing::train(2, kTrain + extra + " --save " + root);
    ASSERT_EQ(run.result.status, 0) << run.result.output;
    const std::string hf = dir + "/" + variant + "_hf";
    auto exported = testing::convert("export --load " + root + " --output " + hf + " --max-shard-size 20000");
    ASSERT_EQ(exported.status, 0) << exported.output;
    EXPECT_TRUE(fs::exists(hf + "/model.safetensors.index.json")) << exported.output;
    const std::string config = file_bytes(hf + "/config.json");
    EXPECT_NE(config.find(variant == "llama" ? "LlamaForCausalLM" : "Qwen3ForCausalLM"), std::string::npos) << config;
    const at::Tensor ours = megacpp_logits(root, hf, variant == "llama-1p");
    const double diff = (ours - testing::hf_reference_logits(hf, testing::reference_tokens(), ours.size(2))).abs().max().item<double>();
    std::cout << variant << ": max |megacpp - hf_forward.py| = " << diff << std::endl;
    EXPECT_LE(diff, 1e-4) << variant;
  }
}

TEST(Convert, Bf16ExportImportExportIsExactAndTheImportTrains) {
  const std::string dir = testing::scratch_dir();
  const std::string root = dir + "/trained";
  auto run = testing::train(2, kTrain + " --save " + root);
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  auto first = testing::convert("export --load " + root + " --output " + dir + "/hf1 --dtype bfloat16");
  ASSERT_EQ(first.status, 0) << first.output;
  auto imported = testing::convert("import --input " + dir + "/hf1 --save " + dir + "/imported --ckpt-format torch_dcp");
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_NE(imported.output.find("--num-layers 2 --hidden-size 32 --ffn-hidden-size 48"), std::string::npos) << imported.output;
  EXPECT_EQ(file_bytes(dir + "/imported/latest_checkpointed_iteration.txt"), "release");
  auto second = testing::convert("export --load " + dir + "/imported --output " + dir + "/hf2 --dtype bfloat16");
  ASSERT_EQ(second.status, 0) << second.output;
  for (const char* file : {"model.safetensors", "config.json"}) {
    EXPECT_EQ(file_bytes(dir + "/hf1/" + file), file_bytes(dir + "/hf2/" + file)) << file;
  }
  // Training starts from the imported weights at iteration 1.
  auto trained = testing::train(2, kTrain + " --load " + dir + "/imported");
  ASSERT_EQ(trained.result.status, 0) << trained.result.output;
  EXPECT_EQ(trained.losses.size(), 3u);
  EXPECT_NE(trained.result.output.find("model weights only"), std::string::npos) << trained.result.output;

  // Refusals name what is wrong.
  auto again = testing::convert("import --input " + dir + "/hf1 --save " + dir + "/imported");
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.output.find("already holds checkpoints"), std::string::npos) << again.output;
  fs::copy(dir + "/hf1", dir + "/broken", fs::copy_options::recursive);
  std::string cfg = file_bytes(dir + "/broken/config.json");
  cfg.replace(cfg.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 3");
  std::ofstream(dir + "/broken/config.json") << cfg;
  auto missing = testing::convert("import --input " + dir + "/broken --save " + dir + "/broken_ckpt");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("no tensor 'model.layers.2."), std::string::npos) << missing.output;
  auto usage = testing::convert("export --output " + dir + "/x");
  EXPECT_EQ(usage.status, 2);
  EXPECT_NE(usage.output.find("export needs --load"), std::string::npos) << usage.output;
}

}  // namespace
}  // namespace megacpp
