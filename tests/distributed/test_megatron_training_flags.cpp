// Megatron's training flags that megacpp-train carries out: whole-layer recompute
// (--recompute-granularity full), the decoupled learning rate of the input and output layers,
// the on-disk cache of the sample indices (--data-cache-path), the profiler (--profile),
// --empty-unused-memory-level, and fp16 with Megatron's loss scaler (--fp16).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "parallel/compat.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::expect_same_losses;
using testing::train;
using testing::TrainRun;

const std::string kTrainingFlags =
    "--model-type llama --mock-data --seed 7 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 "
    "--tokenizer-type NullTokenizer --vocab-size 63 --eval-iters 0 --seq-length 16 --micro-batch-size 2 "
    "--global-batch-size 4 --train-iters 4 --log-interval 1 --lr 3e-3 --use-torch-fsdp2 "
    "--untie-embeddings-and-output-weights";

bool has(const TrainRun& run, const std::string& text) { return run.result.output.find(text) != std::string::npos; }

TEST(MegatronTrainingFlags, FullAndSelectiveRecomputeGiveTheSameLosses) {
  const TrainRun plain = train(2, kTrainingFlags);
  ASSERT_EQ(plain.losses.size(), 4u) << plain.result.output;
  const TrainRun uniform = train(2, kTrainingFlags + " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  EXPECT_TRUE(has(uniform, "fsdp2: recompute on layers.0, layers.1")) << uniform.result.output;
  expect_same_losses(plain, uniform, "uniform", 1e-6);
  const TrainRun block = train(2, kTrainingFlags + " --recompute-granularity full --recompute-method block --recompute-num-layers 1");
  EXPECT_TRUE(has(block, "fsdp2: recompute on layers.0\n")) << block.result.output;
  expect_same_losses(plain, block, "block", 1e-6);
  const TrainRun grouped = train(1, kTrainingFlags + " --recompute-granularity full --recompute-method uniform --recompute-num-layers 2");
  EXPECT_TRUE(has(grouped, "megacpp recomputes each layer on its own")) << grouped.result.output;
  // Selective: only each layer's core attention (Megatron's --recompute-activations is the same).
  for (const std::string selective : {"--recompute-granularity selective", "--recompute-activations"}) {
    const TrainRun core = train(2, kTrainingFlags + " " + selective);
    EXPECT_TRUE(has(core, "fsdp2: recompute on layers.0.self_attn.core_attention, layers.1.self_attn.core_attention"))
        << core.result.output;
    expect_same_losses(plain, core, selective, 1e-6);
  }

  const std::string dir = testing::scratch_dir();
  const std::string yaml = testing::write_file(dir, "recompute.yaml", "recompute_modules: ['layers.{*}']\n");
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--recompute-granularity coarse", "--recompute-granularity coarse: expected full or selective"},
           {"--recompute-granularity selective --recompute-method uniform", "are for --recompute-granularity full"},
           {"--recompute-activations --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
            "--recompute-activations (selective) contradicts --recompute-granularity full"},
           {"--recompute-granularity full --recompute-num-layers 1", "needs --recompute-method uniform or block"},
           {"--recompute-method block", "need --recompute-granularity full"},
           {"--recompute-granularity full --recompute-method block --recompute-num-layers 1 --fsdp2-config-path " + yaml,
            "--recompute-granularity and recompute_modules in " + yaml + " both say what to recompute"},
       }) {
    const TrainRun refused = train(1, kTrainingFlags + " " + flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_TRUE(has(refused, message)) << flags << "\n" << refused.result.output;
  }
}

// With --lr 0, only the token embedding and the output layer move, at --decoupled-lr.
TEST(MegatronTrainingFlags, DecoupledLrMovesOnlyTheInputAndOutputLayers) {
  const std::string dir = testing::scratch_dir();
  const std::string frozen = kTrainingFlags + " --lr 0 --min-lr 0 --weight-decay 0.1 --decoupled-lr 0 --dump-final-params " + dir + "/frozen.pt";
  const std::string moving = kTrainingFlags + " --lr 0 --min-lr 0 --weight-decay 0.1 --decoupled-lr 1e-2 --decoupled-min-lr 1e-3 --dump-final-params " + dir + "/moving.pt";
  ASSERT_EQ(train(2, frozen).result.status, 0);
  const TrainRun run = train(2, moving);
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  const auto before = testing::read_tensor_dict(dir + "/frozen.pt"), after = testing::read_tensor_dict(dir + "/moving.pt");
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, tensor] : before) {
    const bool decoupled = name.rfind("embed_tokens.", 0) == 0 || name.rfind("lm_head.", 0) == 0;
    EXPECT_EQ(tensor.equal(after.at(name)), !decoupled) << name;
  }
}

// A preprocessed fortune file (ByteLevelTokenizer) at DIR/fortunes.
std::string fortunes(const std::string& dir) {
  const auto made = testing::run_command(std::string(MEGACPP_PREPROCESS_BINARY) +
                                         " --input /usr/share/games/fortunes/science --input-format text --document-separator % "
                                         "--append-eod --output-prefix " + dir + "/fortunes");
  EXPECT_EQ(made.status, 0) << made.output;
  return dir + "/fortunes_text_document";
}

TEST(MegatronTrainingFlags, DataCachePathKeepsTheSampleIndicesForTheNextRun) {
  const std::string dir = testing::scratch_dir(), cache = dir + "/cache";
  const std::string flags = "--data-path " + fortunes(dir) +
                            " --tokenizer-type ByteLevelTokenizer --seed 3 --num-layers 1 --hidden-size 32 --num-attention-heads 4 "
                            "--seq-length 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --log-interval 1 "
                            "--eval-interval 3 --eval-iters 1 --split 90,10,0 --use-torch-fsdp2 --data-cache-path " + cache;
  const TrainRun first = train(2, flags);
  ASSERT_EQ(first.losses.size(), 3u) << first.result.output;
  EXPECT_FALSE(has(first, "indices from")) << first.result.output;
  size_t descriptions = 0;
  for (const auto& entry : fs::directory_iterator(cache)) descriptions += entry.path().string().find("-GPTDataset-description.txt") != std::string::npos;
  EXPECT_EQ(descriptions, 2u) << "one per split (train, validation)";
  // NumPy reads the indices.
  const auto numpy = testing::run_command("/usr/bin/python3 -c \"import numpy, glob; a = [numpy.load(f) for f in sorted(glob.glob('" + cache +
                                          "/*sample_index.npy'))]; print([x.shape[1] for x in a], [str(x.dtype) for x in a])\"");
  EXPECT_NE(numpy.output.find("[2, 2] ['int64', 'int64']"), std::string::npos) << numpy.output;

  const TrainRun second = train(2, flags);
  EXPECT_TRUE(has(second, "(indices from " + cache + ")")) << second.result.output;
  expect_same_losses(first, second, "from the cache", 0);
  // A damaged file is built again, not read.
  for (const auto& entry : fs::directory_iterator(cache)) {
    if (entry.path().string().find("shuffle_index.npy") != std::string::npos) fs::resize_file(entry.path(), 100);
  }
  const TrainRun third = train(2, flags);
  EXPECT_TRUE(has(third, "building the indices again")) << third.result.output;
  expect_same_losses(first, third, "rebuilt", 0);
}

TEST(MegatronTrainingFlags, ProfileWritesAChromeTracePerRank) {
  const std::string dir = testing::scratch_dir();
  const TrainRun run = train(2, kTrainingFlags + " --profile --profile-step-start 1 --profile-step-end 2 --profile-ranks 0 1 "
                                         "--profile-save-path " + dir + " --empty-unused-memory-level 2");
  ASSERT_EQ(run.losses.size(), 4u) << run.result.output;
  for (int rank : {0, 1}) {
    const std::string path = dir + "/rank" + std::to_string(rank) + "_iterations_2-2.pt.trace.json";
    ASSERT_TRUE(fs::exists(path)) << run.result.output;
    const nlohmann::json trace = nlohmann::json::parse(testing::read_file(path));
    bool iteration = false, matmul = false;
    for (const auto& event : trace.at("traceEvents")) {
      iteration = iteration || event.at("name") == "iteration 2";
      matmul = matmul || event.at("name") == "aten::mm";
      EXPECT_EQ(event.at("ph"), "X");
    }
    EXPECT_TRUE(iteration && matmul) << path;
  }
  const TrainRun plain = train(2, kTrainingFlags);
  expect_same_losses(plain, run, "profiled, memory released", 0);
}

// --use-checkpoint-args: the model is the checkpoint's, whatever the model flags say.
TEST(MegatronTrainingFlags, UseCheckpointArgsTrainsTheCheckpointsModel) {
  const std::string dir = testing::scratch_dir();
  ASSERT_EQ(train(2, kTrainingFlags + " --save " + dir + "/ckpt").result.status, 0);
  const std::string other_model = std::string(kTrainingFlags) + " --num-layers 1 --hidden-size 16 --train-iters 6 --load " + dir + "/ckpt";
  const TrainRun refused = train(1, other_model);
  EXPECT_TRUE(has(refused, "--num-layers")) << "the checkpoint does not fit the flags' model: " << refused.result.output;
  const TrainRun run = train(1, other_model + " --use-checkpoint-args");
  ASSERT_EQ(run.losses.size(), 2u) << run.result.output;
  EXPECT_TRUE(has(run, "--use-checkpoint-args: the model of " + dir + "/ckpt/iter_0000004 (--model-type llama --num-layers 2 "
                       "--hidden-size 32")) << run.result.output;
  const TrainRun missing = train(1, kTrainingFlags + " --use-checkpoint-args --exit-on-missing-checkpoint --load " + dir + "/none");
  EXPECT_TRUE(has(missing, "--use-checkpoint-args: --load " + dir + "/none has no checkpoint and --exit-on-missing-checkpoint"))
      << missing.result.output;
}

// --rampup-batch-size: the global batch grows as Megatron grows it, the same at every world size;
// with --train-samples the iterations are counted over the ramp as Megatron counts them.
TEST(MegatronTrainingFlags, RampupBatchSizeGrowsTheBatchTheSameAtEveryWorldSize) {
  const std::string flags =
      "--model-type llama --mock-data --seed 5 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 "
      "--tokenizer-type NullTokenizer --vocab-size 63 --eval-iters 0 --seq-length 16 --micro-batch-size 2 "
      "--global-batch-size 16 --rampup-batch-size 4 4 40 --train-samples 100 --lr-warmup-samples 8 --log-interval 1 "
      "--lr 3e-3 --use-torch-fsdp2";
  const TrainRun one = train(1, flags);
  ASSERT_EQ(one.losses.size(), 10u) << one.result.output;  // 4 4 4 4 8 8 12, then three of 16
  EXPECT_TRUE(has(one, "batch size rampup from 4 to 16 samples, +4 every 13 samples, over 40 samples")) << one.result.output;
  EXPECT_TRUE(has(one, "iteration        1/      10 | consumed samples:            4 |")) << one.result.output;
  EXPECT_TRUE(has(one, "iteration        7/      10 | consumed samples:           44 |")) << one.result.output;
  EXPECT_TRUE(has(one, "global batch size:    12 |")) << one.result.output;
  EXPECT_TRUE(has(one, "iteration       10/      10 | consumed samples:           92 |")) << one.result.output;
  const TrainRun two = train(2, flags);
  expect_same_losses(one, two, "rampup on 2 ranks", 1e-5);
}

// --dataloader-type cyclic: a random order per pass, the same global batches at every world size.
TEST(MegatronTrainingFlags, CyclicDataloaderReadsTheSameBatchesAtEveryWorldSize) {
  const TrainRun one = train(1, kTrainingFlags + " --dataloader-type cyclic");
  ASSERT_EQ(one.losses.size(), 4u) << one.result.output;
  EXPECT_TRUE(has(one, "--dataloader-type cyclic: the training samples in a random order")) << one.result.output;
  const TrainRun two = train(2, kTrainingFlags + " --dataloader-type cyclic");
  expect_same_losses(one, two, "cyclic on 2 ranks", 1e-5);
  const TrainRun single = train(2, kTrainingFlags + " --dataloader-type single");
  ASSERT_EQ(single.losses.size(), 4u) << single.result.output;
  EXPECT_NE(single.losses, two.losses) << "cyclic read the samples in order";
  const TrainRun external = train(1, kTrainingFlags + " --dataloader-type external");
  EXPECT_TRUE(has(external, "--dataloader-type external: not supported (only single or cyclic")) << external.result.output;
}

// --fp16 on 2 ranks: within 2% of fp32 over 50 iterations; a scale too high for fp16 overflows,
// and those iterations are skipped and logged as Megatron does; a resumed run carries the scale
// on. Where the libtorch has no fp16 matmul on the CPU (Debian's 1.13) --fp16 is refused.
TEST(MegatronTrainingFlags, Fp16WithLossScalingTracksFp32AndSkipsOverflows) {
  const std::string flags =
      "--model-type llama --mock-data --seed 11 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 128 "
      "--tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --seq-length 32 --micro-batch-size 4 "
      "--global-batch-size 8 --train-iters 50 --log-interval 1 --lr 3e-3 --lr-warmup-iters 5 --use-torch-fsdp2";
  const TrainRun fp16 = train(2, flags + " --fp16 --initial-loss-scale 4096");
  if (!parallel::compat::kCpuHalfMatmul) {
    EXPECT_TRUE(has(fp16, "--fp16 is not supported on CPU by this libtorch")) << fp16.result.output;
    return;
  }
  const TrainRun fp32 = train(2, flags);
  ASSERT_EQ(fp16.losses.size(), 50u) << fp16.result.output;
  EXPECT_TRUE(has(fp16, "compute Half")) << fp16.result.output;
  EXPECT_TRUE(has(fp16, "loss scale: 4096.0 | number of skipped iterations:   0 |")) << fp16.result.output;
  expect_same_losses(fp32, fp16, "fp16", 0.02);
  EXPECT_NE(fp16.losses, fp32.losses) << "fp16 printed exactly the fp32 losses: was fp16 compute applied?";

  const std::string dir = testing::scratch_dir();
  const std::string overflowing = flags + " --fp16 --initial-loss-scale 16777216 --hysteresis 1 --save " + dir;
  const TrainRun high = train(2, overflowing + " --train-iters 40 --exit-interval 30");
  ASSERT_EQ(high.losses.size(), 30u) << high.result.output;
  EXPECT_TRUE(has(high, "iteration 1: the gradients overflowed at loss scale 16777216: step skipped, loss scale now 8388608"))
      << high.result.output;
  EXPECT_TRUE(has(high, "number of skipped iterations:   1 |")) << high.result.output;
  EXPECT_LT(high.losses.back(), high.losses.front()) << high.result.output;
  // Resumed at 30: the same losses as a run that went on to 40 (the scale and the skipped steps are
  // in the checkpoint).
  const TrainRun whole = train(2, overflowing + "-whole --train-iters 40");
  const TrainRun resumed = train(2, overflowing + " --load " + dir + " --train-iters 40");
  ASSERT_EQ(resumed.losses.size(), 10u) << resumed.result.output;
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(resumed.losses[i], whole.losses[30 + i], 1e-6 * whole.losses[30 + i]) << i;
}

}  // namespace
}  // namespace megacpp
