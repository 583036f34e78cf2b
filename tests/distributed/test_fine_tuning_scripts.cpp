// The published scripts of issue 29, run as their users run them with megacpp (torchrun ->
// megacpp-run, the Python entry point -> megacpp-train), the sizes scaled down to this machine
// and the paths filled in: MindSpeed-LLM's FSDP2 Qwen3 trainer from a Hugging Face folder with
// the chunked loss, its Qwen2.5 pretraining and Qwen2.5 LoRA instruction tuning, and Megatron-LM's
// and MindSpeed-LLM's Mixtral. Every other flag is passed as written: each works, or is refused
// by name with a reason and then taken out, as a user would.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/launch_scripts.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::Edit;
using testing::edited_script;
using testing::expect_trained;
using testing::kFixtures;
using testing::kQwen3Tokenizer;
using testing::run_script;
using testing::TrainRun;

constexpr int64_t kQwenVocab = 151936;  // Qwen's config.json vocab_size (its tokenizer's 151669, padded)

// A tiny Qwen model of `config` with Qwen's vocabulary as a Hugging Face folder with Qwen3's
// tokenizer files, as a hub download would be.
std::string write_qwen_folder(const std::string& dir, models::LlamaConfig config) {
  config.vocab_size = kQwenVocab;
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.02, 7);
  fs::create_directories(dir);
  testing::write_hf_folder(dir, config, parallel::fsdp::gather_full_parameters(model), uint64_t{1} << 40);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(kQwen3Tokenizer + "/" + file, dir + "/" + file);
  return dir;
}

std::string checked(const TrainRun& run, const std::string& text) {
  EXPECT_NE(run.result.output.find(text), std::string::npos) << run.result.output;
  return text;
}

TEST(FineTuningScripts, MindSpeedLlmQwen3Fsdp2FromAHuggingFaceFolder) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
  config.max_position_embeddings = 32;
  const std::string hf = write_qwen_folder(dir + "/Qwen3-tiny", config);
  const std::vector<Edit> edits = {
      {"NPUS_PER_NODE=16", "NPUS_PER_NODE=2"},
      {"MASTER_PORT=6000", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"DATA_PATH=\"your data path\"", "DATA_PATH=\"" + testing::qwen3_fortunes(dir) + "\""},
      {"TOKENIZER_PATH=\"your tokenizer path\"", "TOKENIZER_PATH=\"" + hf + "\""},
      {"HF_PATH=\"huggingface model path\"", "HF_PATH=\"" + hf + "\""},
      {"SAVE_CKPT_DIR=\"ckpt save path\"", "SAVE_CKPT_DIR=\"" + dir + "/ckpt\""},
      {"FSDP2_PATH=\"./examples/fsdp2/qwen3/fsdp2_config.yaml\"", "FSDP2_PATH=\"" + kFixtures + "mindspeed_llm_qwen3_32k_fsdp2_config.yaml\""},
      {"SEQ_LENGTH=32768", "SEQ_LENGTH=32"},
      {"TRAIN_ITERS=2000", "TRAIN_ITERS=4"},
      {"--loss-chunk-size 1024", "--loss-chunk-size 24"},
      {"--num-layers 36", "--num-layers 2"},
      {"--hidden-size 4096", "--hidden-size 32"},
      {"--num-attention-heads 32", "--num-attention-heads 4"},
      {"--num-query-groups 8", "--num-query-groups 2"},
      {"torchrun $DISTRIBUTED_ARGS train_fsdp2.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  const TrainRun run = run_script(dir, edited_script("mindspeed_llm_pretrain_qwen3_8b_32k_fsdp2_A3.sh", edits, dir));
  expect_trained(run, 4);
  checked(run, "--init-from-hf-path");
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000004")) << run.result.output;
  // The same run without the chunked loss: the same losses (bf16, so to bf16's rounding).
  std::vector<Edit> whole = edits;
  for (auto& e : whole) {
    if (e.from.rfind("SAVE_CKPT_DIR", 0) == 0) e.to = "SAVE_CKPT_DIR=\"" + dir + "/ckpt-whole\"";
  }
  whole.push_back({"--loss-compute-mode chunk", "--loss-compute-mode default"});
  testing::expect_same_losses(run, run_script(dir, edited_script("mindspeed_llm_pretrain_qwen3_8b_32k_fsdp2_A3.sh", whole, dir)),
                              "--loss-compute-mode default", 2e-2);
}

// MindSpeed-LLM's Qwen2.5 scripts' model edits: 2 layers of 64, 4 heads in 2 groups.
std::vector<Edit> qwen25_sizes(const std::string& layers, const std::string& hidden, const std::string& ffn, const std::string& heads) {
  return {{"--num-layers " + layers, "--num-layers 2"},
          {"--hidden-size " + hidden, "--hidden-size 64"},
          {"--ffn-hidden-size " + ffn, "--ffn-hidden-size 128"},
          {"--num-attention-heads " + heads, "--num-attention-heads 4"}};
}

TEST(FineTuningScripts, MindSpeedLlmQwen25Pretraining) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  std::vector<Edit> edits = {
      {"NPUS_PER_NODE=8", "NPUS_PER_NODE=2"},
      {"MASTER_PORT=6011", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"CKPT_SAVE_DIR=\"your model save ckpt path\"", "CKPT_SAVE_DIR=\"" + dir + "/ckpt\""},
      {"DATA_PATH=\"your data path\"", "DATA_PATH=\"" + testing::qwen3_fortunes(dir) + "\""},
      {"TOKENIZER_PATH=\"your tokenizer path\"", "TOKENIZER_PATH=\"" + kQwen3Tokenizer + "\""},
      {"CKPT_LOAD_DIR=\"your model ckpt path\"", "CKPT_LOAD_DIR=\"" + dir + "/ckpt\""},
      {"CP=2", "CP=1"},  // one machine: the two ranks split the data
      {"GBS=32", "GBS=4"},
      {"SEQ_LEN=32768", "SEQ_LEN=32"},
      {"--train-iters 2000", "--train-iters 4"},
      {"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  for (const auto& e : qwen25_sizes("24", "896", "4864", "14")) edits.push_back(e);
  const TrainRun run = run_script(dir, edited_script("mindspeed_llm_pretrain_qwen25_0point5_32k_ptd.sh", edits, dir));
  expect_trained(run, 4);
  checked(run, "vocabulary PretrainedFromHF (151669 padded to 151936)");
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000004")) << run.result.output;
}

TEST(FineTuningScripts, MindSpeedLlmQwen25LoraTuning) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  // The base model: a Qwen2 folder (q/k/v biases, tied) imported as the script's --load.
  models::LlamaConfig config = testing::tiny_llama(/*tied=*/true, /*qwen3=*/false);
  config.add_qkv_bias = true;
  config.hidden_size = 64;
  config.ffn_hidden_size = 128;
  config.max_position_embeddings = 64;  // the script's --max-position-embeddings ${SEQ_LEN}
  config.rotary_base = 1000000;
  const std::string hf = write_qwen_folder(dir + "/Qwen2.5-tiny", config);
  const auto imported = testing::run_command(std::string(MEGACPP_CONVERT_BINARY) + " import --input " + hf + " --save " + dir + "/base");
  ASSERT_EQ(imported.status, 0) << imported.output;
  // The instruction data, rendered with --prompt-type qwen as the script's training flags say.
  std::string lines;
  for (int i = 0; i < 16; ++i) lines += "{\"instruction\": \"Add " + std::to_string(i) + " and 2.\", \"input\": \"\", \"output\": \"" + std::to_string(i + 2) + "\"}\n";
  testing::write_file(dir, "alpaca.jsonl", lines);
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " --input " + dir + "/alpaca.jsonl --output-prefix " + dir +
                                         "/alpaca --handler-name AlpacaStyleInstructionHandler --prompt-type qwen "
                                         "--tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + hf);
  ASSERT_EQ(made.status, 0) << made.output;
  std::vector<Edit> edits = {
      {"NPUS_PER_NODE=8", "NPUS_PER_NODE=2"},
      {"MASTER_PORT=6000", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"CKPT_LOAD_DIR=\"your model ckpt path\"", "CKPT_LOAD_DIR=\"" + dir + "/base\""},
      {"CKPT_SAVE_DIR=\"your model save ckpt path\"", "CKPT_SAVE_DIR=\"" + dir + "/lora\""},
      {"DATA_PATH=\"your data path\"", "DATA_PATH=\"" + dir + "/alpaca\""},
      {"TOKENIZER_PATH=\"your tokenizer path\"", "TOKENIZER_PATH=\"" + hf + "\""},
      {"GBS=8", "GBS=4"},
      {"SEQ_LEN=4096", "SEQ_LEN=64"},
      {"--train-iters 2000", "--train-iters 4"},
      {"torchrun $DISTRIBUTED_ARGS posttrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  for (const auto& e : qwen25_sizes("36", "2048", "11008", "16")) edits.push_back(e);
  // As written it asks for Ascend's MC2 kernel: refused by name; without it, it tunes as LoRA.
  const TrainRun ascend = run_script(dir, edited_script("mindspeed_llm_tune_qwen25_3b_4k_lora_ptd.sh", edits, dir));
  checked(ascend, "--use-ascend-mc2");
  edits.push_back({"    --use-ascend-mc2 \\\n", ""});
  const TrainRun run = run_script(dir, edited_script("mindspeed_llm_tune_qwen25_3b_4k_lora_ptd.sh", edits, dir));
  expect_trained(run, 4);
  checked(run, "lora:");
  EXPECT_TRUE(fs::exists(dir + "/lora/iter_0000004")) << run.result.output;
}

// A Llama 2-style SentencePiece model (BPE with byte fallback, 2000 pieces) of the fortunes, and
// the fortunes tokenized with it: {tokenizer.model, DATA_PATH}.
std::pair<std::string, std::string> llama2_fortunes(const std::string& dir) {
  const auto trained = testing::run_command("cat /usr/share/games/fortunes/computers /usr/share/games/fortunes/science > " + dir +
                                            "/corpus.txt && spm_train --minloglevel=2 --input=" + dir + "/corpus.txt --model_prefix=" +
                                            dir + "/llama2 --vocab_size=2000 --model_type=bpe --byte_fallback=true 2>&1");
  EXPECT_EQ(trained.status, 0) << trained.output;
  const std::string model = dir + "/llama2.model";
  return {model, testing::tokenized_fortunes(dir, "--tokenizer-type Llama2Tokenizer --tokenizer-model " + model)};
}

// Mixtral's sizes in both scripts: 2 layers of 64, 4 heads in 2 groups, 8 experts of 128.
std::vector<Edit> mixtral_sizes(const std::string& hidden_suffix) {
  return {{"--hidden-size 4096" + hidden_suffix, "--hidden-size 64" + hidden_suffix},
          {"--ffn-hidden-size 14336", "--ffn-hidden-size 128"},
          {"--num-attention-heads 32", "--num-attention-heads 4"},
          {"--num-query-groups 8", "--num-query-groups 2"}};
}

TEST(FineTuningScripts, MegatronMixtral) {
  const std::string dir = testing::scratch_dir();
  const auto [tokenizer, data] = llama2_fortunes(dir);
  std::vector<Edit> edits = {
      {"GPUS_PER_NODE=8", "GPUS_PER_NODE=2"},
      {"MASTER_PORT=${MASTER_PORT:-\"6000\"}", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"--seq-length 4096", "--seq-length 32"},
      {"--max-position-embeddings 32768", "--max-position-embeddings 64"},
      {"--num-layers 32", "--num-layers 2"},
      {"--global-batch-size 256", "--global-batch-size 8"},
      {"--train-iters 500000", "--train-iters 4"},
      {"--lr-decay-iters 320000", "--lr-decay-iters 4"},
      {"--lr-warmup-iters 500", "--lr-warmup-iters 1"},
      {"--pipeline-model-parallel-size 4", "--pipeline-model-parallel-size 1"},
      {"--expert-model-parallel-size 8", "--expert-model-parallel-size 1"},
      {"--split 99990,8,2", "--split 98,1,1"},  // a validation split a few hundred fortunes fill
      {"--eval-iters 10", "--eval-iters 1"},
      {"torchrun ${DISTRIBUTED_ARGS[@]} examples/classes/pretrain_gpt.py", "megacpp-run ${DISTRIBUTED_ARGS[@]} megacpp-train"},
  };
  for (const auto& e : mixtral_sizes("")) edits.push_back(e);
  const TrainRun run = run_script(dir, edited_script("megatron_train_mixtral_8x7b_distributed.sh", edits, dir),
                                  dir + "/ckpt " + tokenizer + " " + data);
  expect_trained(run, 4);
  checked(run, "load_balancing_loss");
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000004")) << run.result.output;
}

TEST(FineTuningScripts, MindSpeedLlmMixtral) {
  const std::string dir = testing::scratch_dir();
  const auto [tokenizer, data] = llama2_fortunes(dir);
  std::vector<Edit> edits = {
      {"NPUS_PER_NODE=8", "NPUS_PER_NODE=2"},
      {"MASTER_ADDR=\"your master node IP\"", "MASTER_ADDR=localhost"},
      {"MASTER_PORT=6000", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"NNODES=8", "NNODES=1"},
      {"DATA_PATH=\"your data path\"", "DATA_PATH=\"" + data + "\""},
      {"TOKENIZER_MODEL=\"your tokenizer path\"", "TOKENIZER_MODEL=\"" + tokenizer + "\""},
      {"CKPT_SAVE_DIR=\"your model save ckpt path\"", "CKPT_SAVE_DIR=\"" + dir + "/ckpt\""},
      {"CKPT_LOAD_DIR=\"your model ckpt path\"", "CKPT_LOAD_DIR=\"" + dir + "/ckpt\""},
      {"TP=8", "TP=2"},  // with its --sequence-parallel, on the 2 ranks there are
      {"CP=4", "CP=1"},
      {"NUM_LAYERS=32", "NUM_LAYERS=2"},
      {"--seq-length 32768", "--seq-length 32"},
      {"--max-position-embeddings 32768", "--max-position-embeddings 64"},
      {"--vocab-size 32000", "--vocab-size 2000"},
      {"--global-batch-size 32", "--global-batch-size 8"},
      {"--train-iters 2000", "--train-iters 4"},
      {"--lr-decay-iters 1280", "--lr-decay-iters 4"},
      {"--split 99990,8,2", "--split 98,1,1"},
      {"--eval-iters 100", "--eval-iters 1"},
      {"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  for (const auto& e : mixtral_sizes("  ")) edits.push_back(e);
  const TrainRun run = run_script(dir, edited_script("mindspeed_llm_pretrain_mixtral_8x7b_ptd.sh", edits, dir));
  expect_trained(run, 4);
  checked(run, "load_balancing_loss");
  EXPECT_NE(run.result.output.find("(2 mixture-of-experts layer(s) replicated on each) and the vocabulary split over 2 ranks [0, 1], "
                                   "sequence parallel between them"),
            std::string::npos)
      << run.result.output;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000004")) << run.result.output;
}

}  // namespace
}  // namespace megacpp
