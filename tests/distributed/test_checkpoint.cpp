// megacpp-train checkpoints end to end: a resumed run continues exactly (same world size),
// or within 1e-5 on another world size and mesh; saves survive a SIGKILL; damaged files are
// reported by name; PyTorch-side readers see the same tensors megacpp trained.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::TrainRun;

// Uneven shards on 4 ranks: 70 ffn rows, 40 hidden rows, 260 vocabulary rows over 4 or 3 ranks.
const std::string kCheckpointModel =
    "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 259 --make-vocab-size-divisible-by 4 --seed 7 "
    "--num-layers 2 --hidden-size 40 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 70 "
    "--seq-length 16 --micro-batch-size 1 --global-batch-size 12 --log-interval 1 --lr 3e-3 --lr-warmup-iters 2 "
    "--eval-interval 5 --eval-iters 1 --train-iters 10 --untie-embeddings-and-output-weights";

// fsdp_flags with the file named after its YAML, so that each layout is written once per directory.
std::string fsdp_yaml_flags(const std::string& dir, const std::string& yaml) {
  return testing::fsdp_flags(dir, "fsdp_" + std::to_string(std::hash<std::string>{}(yaml)) + ".yaml", yaml);
}
const char* kLayers = "sub_modules_to_wrap: ['layers.{*}']\n";

// A resumed run logs iterations from+1..10 identical to the straight run's (and the same
// validation losses afterwards).
void expect_resumes_exactly(const TrainRun& straight, const TrainRun& resumed, const std::string& what) {
  ASSERT_EQ(resumed.result.status, 0) << what << "\n" << resumed.result.output;
  ASSERT_EQ(resumed.losses.size(), 5u) << what << "\n" << resumed.result.output;
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(resumed.losses[i], straight.losses[5 + i]) << what << ": iteration " << 6 + i;
  ASSERT_FALSE(resumed.validation.empty()) << resumed.result.output;
  EXPECT_EQ(resumed.validation.back(), straight.validation.back()) << what;
}

TEST(Checkpoint, ResumeGivesTheSameLossesInBothFormatsSyncAndAsync) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = kCheckpointModel + fsdp_yaml_flags(dir, kLayers);
  for (const std::string format : {"torch_dcp", "torch_dist"}) {
    for (const std::string async : {"", " --async-save"}) {
      const std::string save = dir + "/" + format + (async.empty() ? "" : "_async");
      TrainRun straight = testing::train(2, flags + " --save " + save + " --save-interval 5 --ckpt-format " + format + async);
      ASSERT_EQ(straight.result.status, 0) << straight.result.output;
      ASSERT_EQ(straight.losses.size(), 10u);
      EXPECT_EQ(testing::read_file(save + "/latest_checkpointed_iteration.txt"), "10");
      EXPECT_TRUE(fs::exists(save + "/iter_0000005/.metadata"));
      EXPECT_EQ(fs::exists(save + "/iter_0000005/metadata.json"), format == "torch_dist");
      EXPECT_FALSE(fs::exists(save + "/iter_0000005.tmp"));
      TrainRun resumed = testing::train(2, flags + " --load " + save + " --ckpt-step 5");
      expect_resumes_exactly(straight, resumed, format + async);
      EXPECT_NE(resumed.result.output.find("resuming at iteration 5"), std::string::npos) << resumed.result.output;
    }
  }
}

TEST(Checkpoint, ResumesOnAnotherWorldSizeAndMesh) {
  const std::string dir = testing::scratch_dir();
  const std::string hsdp = fsdp_yaml_flags(dir, "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  const std::string layers = fsdp_yaml_flags(dir, kLayers);
  TrainRun four = testing::train(4, kCheckpointModel + layers + " --save " + dir + "/fsdp4 --save-interval 5 --ckpt-format torch_dcp");
  ASSERT_EQ(four.result.status, 0) << four.result.output;
  TrainRun hsdp4 = testing::train(4, kCheckpointModel + hsdp + " --save " + dir + "/hsdp --save-interval 5 --ckpt-format torch_dist");
  testing::expect_same_losses(four, hsdp4, "hsdp 2x2", 1e-5);
  const TrainRun reference = testing::iterations_after(four, 5);
  auto resume = [&](int ranks, const std::string& mesh, const std::string& from, const std::string& extra) {
    return testing::train(ranks, kCheckpointModel + mesh + " --load " + dir + "/" + from + " --ckpt-step 5" + extra);
  };
  testing::expect_same_losses(reference, resume(2, layers, "fsdp4", ""), "fsdp4 -> 2 ranks", 1e-5);
  testing::expect_same_losses(reference, resume(1, " --use-torch-fsdp2", "hsdp", ""), "hsdp 2x2 -> 1 rank", 1e-5);
  testing::expect_same_losses(reference, resume(3, layers, "hsdp", ""), "hsdp 2x2 -> 3 ranks (uneven)", 1e-5);
  // Meta-device model, no initialization: only the local shards are ever allocated.
  testing::expect_same_losses(reference, resume(2, layers, "fsdp4", " --init-model-with-meta-device --no-initialization"),
                              "meta + --no-initialization", 1e-5);
}

TEST(Checkpoint, OptimizerRngAndFinetuneFlags) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = kCheckpointModel + fsdp_yaml_flags(dir, kLayers);
  TrainRun no_optim = testing::train(2, flags + " --train-iters 3 --save " + dir + "/w --no-save-optim");
  ASSERT_EQ(no_optim.result.status, 0) << no_optim.result.output;
  TrainRun refused = testing::train(2, flags + " --load " + dir + "/w");
  EXPECT_NE(refused.result.status, 0);
  EXPECT_NE(refused.result.output.find("holds no optimizer state"), std::string::npos) << refused.result.output;
  EXPECT_NE(refused.result.output.find("--no-load-optim"), std::string::npos) << refused.result.output;
  TrainRun fresh_optim = testing::train(2, flags + " --load " + dir + "/w --no-load-optim");
  ASSERT_EQ(fresh_optim.result.status, 0) << fresh_optim.result.output;
  EXPECT_EQ(fresh_optim.losses.size(), 7u);  // iterations 4..10
  TrainRun finetune = testing::train(2, flags + " --load " + dir + "/w --finetune --train-iters 2");
  ASSERT_EQ(finetune.result.status, 0) << finetune.result.output;
  EXPECT_EQ(finetune.losses.size(), 2u);  // from iteration 1
  // Another world size: RNG states are not restored, and it says so.
  TrainRun other = testing::train(1, kCheckpointModel + " --use-torch-fsdp2 --load " + dir + "/w --no-load-optim --train-iters 4");
  ASSERT_EQ(other.result.status, 0) << other.result.output;
  EXPECT_NE(other.result.output.find("RNG states are not restored"), std::string::npos) << other.result.output;
  // Nothing to load yet: a warning, training from scratch.
  TrainRun nothing = testing::train(1, kCheckpointModel + " --load " + dir + "/empty --train-iters 1");
  ASSERT_EQ(nothing.result.status, 0) << nothing.result.output;
  EXPECT_NE(nothing.result.output.find("no checkpoint found"), std::string::npos) << nothing.result.output;
  // ... unless Megatron's --exit-on-missing-checkpoint says a missing one is a mistake.
  TrainRun missing = testing::train(1, kCheckpointModel + " --load " + dir + "/empty --train-iters 1 --exit-on-missing-checkpoint");
  EXPECT_NE(missing.result.status, 0);
  EXPECT_NE(missing.result.output.find("has no checkpoint (no " + dir + "/empty/latest_checkpointed_iteration.txt) and "
                                       "--exit-on-missing-checkpoint is given"),
            std::string::npos)
      << missing.result.output;
}

// Flips one byte in the middle of the first tensor record of `file`.
void flip_byte(const std::string& file, std::streamoff where) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(where);
  char c = 0;
  f.get(c);
  f.seekp(where);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(Checkpoint, DamagedFilesAreReportedByName) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = kCheckpointModel + fsdp_yaml_flags(dir, kLayers);
  TrainRun saved = testing::train(2, flags + " --train-iters 2 --save " + dir + "/good --ckpt-format torch_dcp");
  ASSERT_EQ(saved.result.status, 0) << saved.result.output;
  auto copy_of = [&](const std::string& name) {
    fs::copy(dir + "/good", dir + "/" + name, fs::copy_options::recursive);
    return dir + "/" + name;
  };
  auto expect_failure = [&](const std::string& root, const std::string& extra, const std::string& needle) {
    TrainRun run = testing::train(2, flags + " --load " + root + extra);
    EXPECT_NE(run.result.status, 0) << needle;
    EXPECT_NE(run.result.output.find(needle), std::string::npos) << "expected '" << needle << "' in\n" << run.result.output;
  };
  const std::string flipped = copy_of("flipped");
  const std::string shard = flipped + "/iter_0000002/__1_0.distcp";
  flip_byte(shard, static_cast<std::streamoff>(fs::file_size(shard) / 2));
  expect_failure(flipped, "", "__1_0.distcp, key '");
  expect_failure(flipped, "", "is corrupted: its CRC-32 is");
  const std::string truncated = copy_of("truncated");
  fs::resize_file(truncated + "/iter_0000002/__0_0.distcp", fs::file_size(truncated + "/iter_0000002/__0_0.distcp") - 100);
  expect_failure(truncated, "", "__0_0.distcp is truncated");
  const std::string missing = copy_of("missing");
  fs::remove(missing + "/iter_0000002/__1_0.distcp");
  expect_failure(missing, "", "__1_0.distcp: cannot open");
  const std::string metadata = copy_of("metadata");
  fs::resize_file(metadata + "/iter_0000002/.metadata", 200);
  expect_failure(metadata, "", "iter_0000002/.metadata has changed since megacpp wrote it");
  fs::remove(metadata + "/iter_0000002/megacpp_checksums.json");  // as a checkpoint PyTorch wrote
  expect_failure(metadata, "", "iter_0000002/.metadata: pickle: truncated data");
  // A model of another shape: its args name the flag; loaded anyway, the key and its two shapes.
  const std::string wider = std::regex_replace(flags, std::regex("--ffn-hidden-size 70"), "--ffn-hidden-size 72");
  TrainRun refused = testing::train(2, wider + " --load " + dir + "/good");
  EXPECT_NE(refused.result.status, 0);
  EXPECT_NE(refused.result.output.find("--ffn-hidden-size is 70 there and 72 here"), std::string::npos) << refused.result.output;
  TrainRun forced = testing::train(2, wider + " --load " + dir + "/good --finetune --dist-ckpt-strictness log_unexpected");
  EXPECT_NE(forced.result.status, 0);
  EXPECT_NE(forced.result.output.find("key 'model.layers.0.mlp.gate_proj.weight' has shape [70, 40] in the checkpoint but [72, 40]"),
            std::string::npos)
      << forced.result.output;
  // The good copy still loads.
  TrainRun good = testing::train(2, flags + " --load " + dir + "/good --train-iters 3");
  EXPECT_EQ(good.result.status, 0) << good.result.output;
  EXPECT_EQ(good.losses.size(), 1u);
}

TEST(Checkpoint, KilledDuringSaveLeavesThePreviousCheckpointLatest) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = kCheckpointModel + fsdp_yaml_flags(dir, kLayers) + " --save " + dir + "/ckpt --save-interval 2";
  TrainRun first = testing::train(2, flags + " --train-iters 2");
  ASSERT_EQ(first.result.status, 0) << first.result.output;
  std::vector<std::string> argv{MEGACPP_RUN_BINARY, "--nproc-per-node", "2", "--master-port", "0", MEGACPP_TRAIN_BINARY};
  std::istringstream words(flags + " --load " + dir + "/ckpt --train-iters 6");
  for (std::string w; words >> w;) argv.push_back(w);
  testing::StreamingProcess job(argv, {{{"MEGACPP_TEST_SAVE_DELAY_MS", "20000"}}, {}});
  // Iteration 4's save has written its rank files and is waiting: kill everything.
  const std::string tmp = dir + "/ckpt/iter_0000004.tmp";
  for (int i = 0; i < 600 && !(fs::exists(tmp + "/__0_0.distcp") && fs::exists(tmp + "/__1_0.distcp")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(tmp + "/__1_0.distcp")) << job.output();
  ::kill(-job.pid(), SIGKILL);
  job.wait(std::chrono::seconds(30));
  EXPECT_EQ(testing::read_file(dir + "/ckpt/latest_checkpointed_iteration.txt"), "2");
  EXPECT_FALSE(fs::exists(dir + "/ckpt/iter_0000004"));
  TrainRun resumed = testing::train(2, flags + " --load " + dir + "/ckpt --train-iters 4");
  ASSERT_EQ(resumed.result.status, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("resuming at iteration 2"), std::string::npos) << resumed.result.output;
  EXPECT_EQ(resumed.losses.size(), 2u);
  EXPECT_EQ(testing::read_file(dir + "/ckpt/latest_checkpointed_iteration.txt"), "4");
  EXPECT_FALSE(fs::exists(tmp)) << "the next save replaces the killed one's leftovers";
}

// The independent Python reader (pickle with the DCP classes mapped to plain ones, torch.load
// per chunk) finds the parameters megacpp gathered, in both formats; torch_dist's common.pt
// and metadata.json are what Megatron writes.
TEST(Checkpoint, PythonReaderSeesTheTrainedParameters) {
  const std::string dir = testing::scratch_dir();
  for (const std::string format : {"torch_dcp", "torch_dist"}) {
    const std::string root = dir + "/" + format;
    TrainRun run = testing::train(4, kCheckpointModel + fsdp_yaml_flags(dir, "sharding_size: 2\n") + " --train-iters 3 --save " + root +
                                         " --ckpt-format " + format + " --dump-final-params " + root + ".pt");
    ASSERT_EQ(run.result.status, 0) << run.result.output;
    const std::string prefix = format == "torch_dcp" ? "model." : "";
    const std::string script =
        "import sys, torch\n"
        "sys.path.insert(0, '" MEGACPP_SOURCE_DIR "/tests/reference')\n"
        "from dcp_reader import read_dcp\n"
        "ckpt = read_dcp('" + root + "/iter_0000003')\n"
        "final = torch.load('" + root + ".pt')\n"
        "assert len(final) > 0\n"
        "for name, t in final.items():\n"
        "    got = ckpt['" + prefix + "' + name]\n"
        "    assert got.dtype == torch.float32 and torch.equal(got, t), name\n"
        "print('checked', len(final), 'parameters')\n";
    const std::string py = testing::write_file(dir, format + ".py", script);
    auto result = testing::run_command(testing::kDebianPython + " " + py);
    EXPECT_EQ(result.status, 0) << result.output;
    EXPECT_NE(result.output.find("checked"), std::string::npos) << result.output;
  }
  const std::string common =
      "import json, torch\n"
      "c = torch.load('" + dir + "/torch_dist/iter_0000003/common.pt', weights_only=False)  # args: a Namespace\n"
      "assert c['iteration'] == 3 and c['checkpoint_version'] == 3.0, c\n"
      "assert c['args'].consumed_train_samples == 36, vars(c['args'])\n"
      "m = json.load(open('" + dir + "/torch_dist/iter_0000003/metadata.json'))\n"
      "assert m['sharded_backend'] == 'torch_dist', m\n"
      "print('common ok')\n";
  auto result = testing::run_command(testing::kDebianPython + " " + testing::write_file(dir, "common.py", common));
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("common ok"), std::string::npos) << result.output;
}

// megacpp-train started by hand (no launcher, no rendezvous store) saves and resumes too.
TEST(Checkpoint, ProcessAloneSavesAndResumes) {
  const std::string dir = testing::scratch_dir();
  const std::string train = std::string(MEGACPP_TRAIN_BINARY) + " " + kCheckpointModel + " --save " + dir + " --save-interval 2";
  auto first = testing::run_command("env -u RANK -u WORLD_SIZE " + train + " --train-iters 2");
  ASSERT_EQ(first.status, 0) << first.output;
  auto second = testing::run_command("env -u RANK -u WORLD_SIZE " + train + " --load " + dir + " --train-iters 3");
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("resuming at iteration 2"), std::string::npos) << second.output;
  EXPECT_EQ(testing::read_file(dir + "/latest_checkpointed_iteration.txt"), "3");
}

TEST(Checkpoint, BadFlagsAreRefusedByName) {
  auto refused = [](const std::string& extra, const std::string& needle) {
    TrainRun run = testing::train(1, kCheckpointModel + extra);
    EXPECT_NE(run.result.status, 0) << extra;
    EXPECT_NE(run.result.output.find(needle), std::string::npos) << extra << "\n" << run.result.output;
  };
  refused(" --save /tmp/x --ckpt-format torch", "--ckpt-format");
  refused(" --save-interval 5", "--save-interval needs --save");
  refused(" --no-initialization", "--no-initialization needs --load");
  refused(" --ckpt-step 3", "--ckpt-step needs --load");
  refused(" --load /nonexistent/dir --ckpt-step 3", "iter_0000003 does not exist");
}

}  // namespace
}  // namespace megacpp
