// megacpp-train --init-from-hf-path (Note [Hugging Face folders]): a Qwen2-style folder (q/k/v
// biases, several safetensors shards with an index) trains on 1, 2 and 4 ranks (FSDP and HSDP)
// from the same first loss as its weights imported with megacpp-convert and given to --load;
// a checkpoint of it exports back to the same tensors, bit for bit; flags that describe another
// model and broken folders are refused before training, naming the flag, file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "io/serialization/safetensors.h"
#include "models/llama/llama_model.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/hf_reference.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;

// Data and training flags shared by every run; the model comes from the folder (or, for the
// --load reference, from the flags megacpp-convert import prints).
const std::string kRun =
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 40 --seed 5 --seq-length 16 --micro-batch-size 1 "
    "--global-batch-size 8 --log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 2";

TEST(InitFromHf, FirstLossOfEveryLayoutIsTheImportedCheckpointsAndTheFolderComesBack) {
  const std::string dir = testing::scratch_dir();
  const std::string hf = dir + "/qwen2";
  testing::write_qwen2_folder(hf, 40000);  // several shards (~40 KB each)
  ASSERT_TRUE(fs::exists(hf + "/" + io::serialization::kSafetensorsIndexName));

  auto imported = testing::convert("import --input " + hf + " --save " + dir + "/imported");
  ASSERT_EQ(imported.status, 0) << imported.output;
  const size_t begin = imported.output.find("--model-type"), end = imported.output.find(" (vocabulary");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos) << imported.output;
  const std::string model_flags = imported.output.substr(begin, end - begin);
  ASSERT_NE(model_flags.find("--add-qkv-bias"), std::string::npos) << imported.output;
  const testing::TrainRun reference = testing::train(1, kRun + " " + model_flags + " --padded-vocab-size 50 --load " + dir + "/imported");
  testing::expect_trained(reference, 2);

  const std::string from_folder = kRun + " --init-from-hf-path " + hf;
  const std::string hsdp = testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  const std::vector<std::pair<std::string, testing::TrainRun>> runs = {
      {"1 rank", testing::train(1, from_folder + " --model-id qwen2.5")},
      {"FSDP on 2 ranks", testing::train(2, from_folder + " --use-torch-fsdp2")},
      {"FSDP on 4 ranks, meta device", testing::train(4, from_folder + " --use-torch-fsdp2 --init-model-with-meta-device")},
      {"HSDP 2x2", testing::train(4, from_folder + hsdp)},
  };
  for (const auto& [what, run] : runs) {
    testing::expect_trained(run, 2);
    if (run.losses.empty() || reference.losses.empty()) continue;
    EXPECT_NEAR(run.losses[0], reference.losses[0], 1e-5 * reference.losses[0]) << what;
    EXPECT_NE(run.result.output.find("loading the weights of " + hf + " (--init-from-hf-path)"), std::string::npos) << what;
  }

  // With --lr 0 the saved weights are the folder's: exported, the same tensors bit for bit.
  auto saved = testing::train(2, from_folder + " --use-torch-fsdp2 --lr 0 --save " + dir + "/ckpt");
  testing::expect_trained(saved, 2);
  auto exported = testing::convert("export --load " + dir + "/ckpt --output " + dir + "/back");
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto original = io::serialization::SafetensorsCheckpoint::open(hf);
  const auto back = io::serialization::SafetensorsCheckpoint::open(dir + "/back");
  ASSERT_EQ(original.names(), back.names());
  for (const auto& name : original.names()) {
    const auto a = original.tensor(name), b = back.tensor(name);
    EXPECT_TRUE(a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes && std::equal(a.data, a.data + a.nbytes, b.data))
        << name;
  }
  EXPECT_NE(testing::read_file(dir + "/back/config.json").find("Qwen2ForCausalLM"), std::string::npos);
}

// Writes `config` as an HF folder (one file) with drawn norms.
void write_folder(const std::string& dir, const models::LlamaConfig& config) {
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.2, 7);
  testing::draw_norms_and_biases(model, 11);
  fs::create_directories(dir);
  testing::write_hf_folder(dir, config, parallel::fsdp::gather_full_parameters(model), 1 << 30);
}

// Runs megacpp-train on one rank from `folder` with `flags`; expects it refused before training
// (status 1, no checkpoint written) with every one of `expected` in its output.
void expect_refused(const std::string& folder, const std::string& flags, const std::vector<std::string>& expected) {
  const std::string save = testing::scratch_dir() + "/never";
  const testing::TrainRun run = testing::train(1, kRun + " --init-from-hf-path " + folder + " " + flags +
                                                                             " --save " + save);
  EXPECT_NE(run.result.status, 0) << flags;
  EXPECT_TRUE(run.losses.empty()) << flags;
  EXPECT_FALSE(fs::exists(save + "/latest_checkpointed_iteration.txt")) << flags;
  for (const auto& text : expected) EXPECT_NE(run.result.output.find(text), std::string::npos) << text << " in:\n" << run.result.output;
}

// A copy of `from` with config.json's `key` set to `value`.
std::string with_config(const std::string& from, const std::string& to, const std::string& key, const nlohmann::json& value) {
  fs::copy(from, to, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(testing::read_file(from + "/config.json"));
  config[key] = value;
  testing::write_file(to, "config.json", config.dump(2));
  return to;
}

TEST(InitFromHf, RefusesFlagsOfAnotherModelAndBrokenFoldersByName) {
  const std::string dir = testing::scratch_dir();
  const std::string hf = dir + "/qwen2";
  testing::write_qwen2_folder(hf, 40000);  // several shards (~40 KB each)
  const std::string config = hf + "/config.json";
  expect_refused(hf, "--hidden-size 64 --qk-layernorm",
                 {"the model flags describe another model than " + config, "--hidden-size: 64 by the flags given, 32 in " + config,
                  "--qk-layernorm: true by the flags given, false in " + config});
  expect_refused(hf, "--model-id qwen3", {"--model-id qwen3 is model_type \"qwen3\", but " + config + ": key 'model_type': \"qwen2\""});
  expect_refused(hf, "--model-id gpt_oss", {"--model-id gpt_oss: GPT-OSS"});
  expect_refused(hf, "--normalization LayerNorm", {"computes", "not --normalization LayerNorm"});
  expect_refused(hf, "--model-type gpt", {config + ": key 'model_type': \"qwen2\": --model-type gpt reads"});
  const std::string unknown = with_config(hf, dir + "/mistral", "model_type", "gpt_oss");
  expect_refused(unknown, "", {unknown + "/config.json: key 'model_type': \"gpt_oss\": megacpp reads"});
  const std::string deeper = with_config(hf, dir + "/deeper", "num_hidden_layers", 3);
  expect_refused(deeper, "", {deeper + ": no tensor 'model.layers.2."});
  const std::string wider = with_config(hf, dir + "/wider", "intermediate_size", 44);
  expect_refused(wider, "", {"tensor 'model.layers.0.mlp.gate_proj.weight': shape [40, 32], the model of " + wider + "/config.json needs [44, 32]"});
  // A NaN in the data (safetensors has no checksum): refused naming the file and the tensor.
  write_folder(dir + "/nan", testing::tiny_llama(/*tied=*/false, /*qwen3=*/false));
  const std::string file = dir + "/nan/" + io::serialization::kSafetensorsSingleName;
  const uint64_t begin = io::serialization::SafetensorsFile::open(file).header_size() + 8 +
                         io::serialization::SafetensorsFile::open(file).data_offsets("model.norm.weight").first;
  {
    std::fstream damaged(file, std::ios::in | std::ios::out | std::ios::binary);
    damaged.seekp(static_cast<std::streamoff>(begin));
    const uint32_t nan_bits = 0x7fc00000u;  // little-endian F32 NaN in the first value
    damaged.write(reinterpret_cast<const char*>(&nan_bits), sizeof(nan_bits));
  }
  expect_refused(dir + "/nan", "", {file + ", tensor 'model.norm.weight': 1 of its values are NaN or infinite"});
  // No tokenizer flag: the folder's tokenizer.json, which this one has not.
  const std::string no_tokenizer = testing::train(1, "--mock-data --seq-length 16 --train-iters 1 --init-from-hf-path " + hf).result.output;
  EXPECT_NE(no_tokenizer.find("--init-from-hf-path '" + hf + "': cannot open " + hf + "/tokenizer.json"), std::string::npos) << no_tokenizer;
  // What changes no weight may differ: a RoPE model's --max-position-embeddings.
  testing::expect_trained(testing::train(1, kRun + " --init-from-hf-path " + hf + " --max-position-embeddings 32"), 2);
}

// Mistral (--model-id mistral): Llama with a sliding window, here 5 keys of 16-token sequences.
// The same losses on 1, 2 and 4 ranks, HSDP 2x2 and from --load of the folder, other losses than the same weights without the window, the
// window's flag checked against config.json, and the folder back, MistralForCausalLM.
TEST(InitFromHf, MistralTrainsWithItsSlidingWindowAndComesBack) {
  const std::string dir = testing::scratch_dir();
  models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/false);
  config.sliding_window = 5;
  write_folder(dir + "/mistral", config);
  const std::string from_folder = kRun + " --init-from-hf-path " + dir + "/mistral";
  const testing::TrainRun one = testing::train(1, from_folder + " --model-id mistral");
  testing::expect_trained(one, 2);
  testing::expect_same_losses(one, testing::train(2, from_folder + " --use-torch-fsdp2"), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(4, from_folder + " --use-torch-fsdp2"), "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train(4, from_folder + testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\n")),
                              "HSDP 2x2", 1e-5);
  // Megatron's --load given the folder reads it as --init-from-hf-path.
  const testing::TrainRun loaded = testing::train(1, kRun + " --load " + dir + "/mistral");
  testing::expect_same_losses(one, loaded, "--load of the folder", 1e-5);
  EXPECT_NE(loaded.result.output.find("--load " + dir + "/mistral is a Hugging Face folder"), std::string::npos) << loaded.result.output;
  testing::expect_trained(testing::train(1, from_folder + " --lr 0 --save " + dir + "/ckpt"), 2);
  const std::string unwindowed = with_config(dir + "/mistral", dir + "/full", "sliding_window", nullptr);
  const testing::TrainRun full = testing::train(1, kRun + " --init-from-hf-path " + unwindowed);
  testing::expect_trained(full, 2);
  EXPECT_GT(std::abs(full.losses[0] - one.losses[0]), 1e-4 * one.losses[0]) << "the window changes what attention sees";
  expect_refused(dir + "/mistral", "--sliding-window 8",
                 {"--sliding-window: 8 by the flags given, 5 in " + dir + "/mistral/config.json"});

  auto exported = testing::convert("export --load " + dir + "/ckpt --output " + dir + "/back");
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto original = io::serialization::SafetensorsCheckpoint::open(dir + "/mistral");
  const auto back = io::serialization::SafetensorsCheckpoint::open(dir + "/back");
  ASSERT_EQ(original.names(), back.names());
  for (const auto& name : original.names()) {
    const auto a = original.tensor(name), b = back.tensor(name);
    EXPECT_TRUE(a.nbytes == b.nbytes && std::equal(a.data, a.data + a.nbytes, b.data)) << name;
  }
  const auto written = nlohmann::json::parse(testing::read_file(dir + "/back/config.json"));
  EXPECT_EQ(written["architectures"], nlohmann::json::array({"MistralForCausalLM"}));
  EXPECT_EQ(written["sliding_window"], 5);
}

}  // namespace
}  // namespace megacpp
