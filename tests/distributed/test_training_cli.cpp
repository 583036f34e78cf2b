// megacpp-train end to end through megacpp-run: loss and parameter parity across world
// sizes and meshes, recompute, bf16, per-rank memory, and refusal of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "parallel/compat.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

const std::string kBaseFlags =
    "--model-type llama --mock-data --seed 1234 --num-layers 2 --hidden-size 40 --num-attention-heads 4 --num-query-groups 2 "
    "--ffn-hidden-size 62 --tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 "
    "--train-iters 10 --log-interval 1 --lr 2e-3 --lr-warmup-iters 2 --untie-embeddings-and-output-weights";

using testing::expect_same_losses;
using testing::expect_same_params;
using testing::train;
using testing::TrainRun;
using testing::write_file;

TEST(TrainingCli, SameLossesAndParametersOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string layers = write_file(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\nnum_to_forward_prefetch: 1\nnum_to_backward_prefetch: 1\n");
  const std::string hsdp = write_file(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}', lm_head]\n");
  const std::string keep = write_file(dir, "keep.yaml", "sub_modules_to_wrap: ['layers.{*}']\nreshard_after_forward: false\n");
  TrainRun reference = train(1, kBaseFlags + " --dump-final-params " + dir + "/ref.pt");
  ASSERT_EQ(reference.result.status, 0) << reference.result.output;
  ASSERT_EQ(reference.losses.size(), 10u) << reference.result.output;
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the model does not learn";

  struct Layout {
    const char* name;
    int ranks;
    std::string flags;
  };
  const std::vector<Layout> layouts = {
      {"fsdp2", 2, "--use-torch-fsdp2 --fsdp2-config-path " + layers},
      {"fsdp4", 4, "--use-torch-fsdp2 --fsdp2-config-path " + layers},
      {"hsdp2x2", 4, "--use-torch-fsdp2 --fsdp2-config-path " + hsdp},
      {"no-reshard2", 2, "--use-torch-fsdp2 --fsdp2-config-path " + keep},
      {"meta2", 2, "--use-torch-fsdp2 --fsdp2-config-path " + layers + " --init-model-with-meta-device"},
      {"plain-dp2", 2, ""},  // Megatron's plain data parallelism: FSDP2 underneath, and the log says so
  };
  for (const auto& layout : layouts) {
    const std::string dump = dir + "/" + layout.name + ".pt";
    TrainRun run = train(layout.ranks, kBaseFlags + " " + layout.flags + " --dump-final-params " + dump);
    expect_same_losses(reference, run, layout.name, 1e-5);
    if (layout.flags.empty()) {
      EXPECT_NE(run.result.output.find("data parallelism on 2 ranks without --use-torch-fsdp2: megacpp's data parallelism is FSDP2"),
                std::string::npos)
          << run.result.output;
    }
    expect_same_params(dir + "/ref.pt", dump, layout.name);
  }
}

TEST(TrainingCli, RecomputeGivesTheSameLosses) {
  const std::string dir = testing::scratch_dir();
  const std::string plain = write_file(dir, "plain.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string recompute = write_file(dir, "recompute.yaml", "sub_modules_to_wrap: ['layers.{*}']\nrecompute_modules: ['layers.{*}']\n");
  TrainRun a = train(2, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + plain);
  TrainRun b = train(2, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + recompute);
  ASSERT_EQ(a.losses.size(), 10u) << a.result.output;
  EXPECT_NE(b.result.output.find("recompute on layers.0, layers.1"), std::string::npos) << b.result.output;
  expect_same_losses(a, b, "recompute", 1e-6);
}

TEST(TrainingCli, Bf16StaysWithinTwoPercentOfFp32) {
  const std::string flags =
      std::string("--model-type llama --mock-data --seed 1234 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 128 "
      "--tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --seq-length 32 --micro-batch-size 4 --global-batch-size 8 --train-iters 50 --log-interval 1 "
      "--lr 3e-3 --lr-warmup-iters 5 --use-torch-fsdp2 --fsdp2-config-path ") +
      write_file(testing::scratch_dir(), "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\noutput_dtype: fp32\n");
  TrainRun fp32 = train(2, flags);
  TrainRun bf16 = train(2, flags + " --bf16");
  ASSERT_EQ(fp32.losses.size(), 50u) << fp32.result.output;
  EXPECT_LT(fp32.losses.back(), 0.8 * fp32.losses.front()) << "fp32 run does not learn";
  expect_same_losses(fp32, bf16, "bf16", 0.02);
  bool differs = false;
  for (size_t i = 0; i < fp32.losses.size(); ++i) differs |= fp32.losses[i] != bf16.losses[i];
  EXPECT_TRUE(differs) << "bf16 run printed exactly the fp32 losses: was bf16 compute applied?";
}

// libtorch 2.x has fp16 matmul on the CPU (compat::kCpuHalfMatmul): param_dtype fp16 trains there
// within 2% of fp32. Debian's 1.13 has none, and the run is refused by name.
TEST(TrainingCli, Fp16OnTheCpuTrainsWhereLibtorchHasTheKernels) {
  const std::string dir = testing::scratch_dir();
  const std::string flags =
      std::string("--model-type llama --mock-data --seed 1234 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 128 "
                  "--tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --seq-length 32 --micro-batch-size 4 "
                  "--global-batch-size 8 --train-iters 30 --log-interval 1 --lr 3e-3 --lr-warmup-iters 5 --use-torch-fsdp2 "
                  "--fsdp2-config-path ");
  const std::string common = "sub_modules_to_wrap: ['layers.{*}']\noutput_dtype: fp32\n";
  TrainRun fp16 = train(2, flags + write_file(dir, "fp16.yaml", common + "param_dtype: fp16\nreduce_dtype: fp32\n"));
  if (!parallel::compat::kCpuHalfMatmul) {
    EXPECT_NE(fp16.result.status, 0);
    EXPECT_NE(fp16.result.output.find("param_dtype fp16 is not supported on CPU by this libtorch"), std::string::npos)
        << fp16.result.output;
    return;
  }
  TrainRun fp32 = train(2, flags + write_file(dir, "fp32.yaml", common));
  ASSERT_EQ(fp16.losses.size(), 30u) << fp16.result.output;
  expect_same_losses(fp32, fp16, "fp16", 0.02);
  EXPECT_NE(fp16.losses, fp32.losses) << "fp16 run printed exactly the fp32 losses: was fp16 compute applied?";
}

TEST(TrainingCli, PerRankStateShrinksWithTheWorld) {
  const std::string flags =
      "--model-type llama --mock-data --num-layers 2 --hidden-size 128 --num-attention-heads 4 --tokenizer-type NullTokenizer --vocab-size 999 --eval-iters 0 --seq-length 8 "
      "--train-iters 1 --log-interval 1 --use-torch-fsdp2 --global-batch-size 4";
  TrainRun one = train(1, flags);
  TrainRun four = train(4, flags);
  ASSERT_EQ(one.memory.size(), 1u) << one.result.output;
  ASSERT_EQ(four.memory.size(), 4u) << four.result.output;
  // Shards hold whole rows; the largest shard exceeds 1/N by at most one row per parameter.
  const double padding_mb = 2 * 9 * 1000 * 4 * 4 / (1024.0 * 1024.0);
  for (const auto& line : four.memory) EXPECT_LE(line.total(), one.memory[0].total() / 4 + padding_mb) << four.result.output;
}

// Under torchrun (PyTorch 2.x) the elastic agent serves the TCPStore on MASTER_PORT and every
// worker, rank 0 included, joins it as a client under "/worker/attempt_<restart count>".
TEST(TrainingCli, JoinsTorchrunsAgentStore) {
  auto agent = testing::host_store();
  const std::string dir = testing::scratch_dir();
  std::string ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks += "RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
             " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(agent->getPort()) +
             " TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0 " + MEGACPP_TRAIN_BINARY + " " + kBaseFlags +
             " --use-torch-fsdp2 > " + dir + "/rank" + std::to_string(rank) + ".log 2>&1 & ";
  }
  const auto result = testing::run_command("cd / && " + ranks + "wait %1 && wait %2 && cat " + dir + "/*.log");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("iteration       10/      10"), std::string::npos) << result.output;
  EXPECT_GT(agent->getNumKeys(), 0) << "the workers never used the agent's store";
}

// --num-workers reads the next iteration's micro-batches ahead (here 4 per rank per iteration,
// on 3 threads); the batches, and so the losses, are those read when needed. (A resumed run's
// first batches are read when needed: the checkpoint tests run with the default 2 workers.)
TEST(TrainingCli, NumWorkersReadAheadTheSameBatches) {
  const std::string flags = kBaseFlags + " --micro-batch-size 1 --use-torch-fsdp2";
  TrainRun when_needed = train(2, flags + " --num-workers 0");
  ASSERT_EQ(when_needed.result.status, 0) << when_needed.result.output;
  TrainRun ahead = train(2, flags + " --num-workers 3");
  ASSERT_EQ(ahead.result.status, 0) << ahead.result.output;
  ASSERT_EQ(ahead.losses.size(), 10u);
  EXPECT_EQ(ahead.losses, when_needed.losses);
  EXPECT_NE(train(1, kBaseFlags + " --num-workers -1").result.output.find("--num-workers must be in [0, 64]"), std::string::npos);
}

// The log a Megatron user expects: the arguments block, the precision in effect, timestamped
// iteration lines, and a summary after training.
TEST(TrainingCli, LogShowsArgumentsPrecisionTimestampsAndASummary) {
  const std::string dir = testing::scratch_dir();
  TrainRun run = train(2, kBaseFlags + " --use-torch-fsdp2 --bf16 --eval-iters 1 --eval-interval 5 --save " + dir + "/ckpt "
                                        "--use-distributed-optimizer");
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  const std::string& out = run.result.output;
  EXPECT_NE(out.find("------------------------ arguments ------------------------"), std::string::npos) << out;
  EXPECT_NE(out.find("  use_torch_fsdp2 " + std::string(48 - 15, '.') + " true"), std::string::npos) << out;
  EXPECT_NE(out.find("  micro_batch_size " + std::string(48 - 16, '.') + " 2"), std::string::npos) << out;
  EXPECT_NE(out.find("-------------------- end of arguments ---------------------"), std::string::npos) << out;
  EXPECT_NE(out.find("precision: parameters and optimizer state Float (the sharded masters) | compute BFloat16 | "
                     "gradient reduction Float | loss Float"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--use-distributed-optimizer: FSDP2 already shards the optimizer state"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +10/ +10 \|)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(training done \| iteration: 10 \(this run: 10\) \| tokens: 1280 \| time: [0-9.]+ s \| )"
                                                R"(tokens per second: [0-9.]+ \| validation loss: best [0-9.]+E[-+]\d+ at iteration (5|10), )"
                                                R"(last [0-9.]+E[-+]\d+ \| checkpoint: .*/ckpt/iter_0000010 \|)")))
      << out;
}

TEST(TrainingCli, BadInputIsRefusedByName) {
  const std::string dir = testing::scratch_dir();
  struct Case {
    int ranks;
    std::string flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {1, kBaseFlags + " --no-such-flag", "no-such-flag"},
      {1, kBaseFlags + " --num-layers x", "num-layers"},
      // Several ranks run FSDP2 without the flag (plain data parallelism), but FSDP2's own features ask for it.
      {2, kBaseFlags + " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
       "--recompute-granularity needs --use-torch-fsdp2"},
      {2, kBaseFlags + " --use-torch-fsdp2 --micro-batch-size 3", "--global-batch-size (8) must be divisible"},
      {1, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + write_file(dir, "bad.yaml", "shardingsize: 2\n"),
       "key 'shardingsize': unknown key"},
      {4, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + write_file(dir, "mesh.yaml", "sharding_size: 3\n"),
       "sharding_size=3 does not divide the world size 4"},
      {1, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + write_file(dir, "wrap.yaml", "sub_modules_to_wrap: ['block.{*}']\n"),
       "pattern 'block.{*}' matches no module"},
      {1, kBaseFlags + " --use-torch-fsdp2 --fsdp2-config-path " + dir + "/missing.yaml", "cannot read"},
  };
  for (const auto& c : cases) {
    TrainRun run = train(c.ranks, c.flags);
    EXPECT_NE(run.result.status, 0) << c.flags;
    EXPECT_NE(run.result.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n" << run.result.output;
  }
}

}  // namespace
}  // namespace megacpp
