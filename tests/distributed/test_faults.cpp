// Nothing silent: a NaN stops the run before it is saved, a checkpoint of another model is
// refused by flag, batch arithmetic that overflows is refused by flag, a re-save killed between
// its renames leaves a loadable checkpoint, and a second job on one --save directory is refused.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "io/checkpoint/layout.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::TrainRun;

const std::string kFaultsModel =
    "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 127 --seed 3 --num-layers 2 --hidden-size 32 "
    "--num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 --seq-length 16 --micro-batch-size 2 "
    "--log-interval 1 --lr 3e-3 --lr-warmup-iters 2 --eval-iters 0 --untie-embeddings-and-output-weights";

std::string tracker(const std::string& save) { return testing::read_file(save + "/latest_checkpointed_iteration.txt"); }

// megacpp-train on one rank with `environment` ("NAME=value ...") set for it.
TrainRun train_with_environment(const std::string& environment, const std::string& flags) {
  return testing::train_with("env " + environment + " " + MEGACPP_TRAIN_BINARY, 1, flags);
}

// The iteration named by the NaN guard's message, or -1.
int64_t stopped_at(const std::string& output) {
  std::smatch m;
  static const std::regex guard(R"(iteration (\d+): the (loss|gradient norm) is)");
  return std::regex_search(output, m, guard) ? std::stoll(m[1]) : -1;
}

TEST(Faults, NonFiniteLossOrGradientStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  const std::string dir = testing::scratch_dir(), save = dir + "/ckpt";
  const std::string flags = kFaultsModel + " --use-torch-fsdp2 --save " + save + " --save-interval 1";
  TrainRun good = testing::train(2, flags + " --train-iters 2");
  ASSERT_EQ(good.result.status, 0) << good.result.output;
  // From iteration 3 on the learning rate is 1e30: the first step after it overflows.
  TrainRun diverged = testing::train(2, flags + " --load " + save + " --train-iters 8 --lr 1e30");
  EXPECT_NE(diverged.result.status, 0) << diverged.result.output;
  const int64_t bad = stopped_at(diverged.result.output);
  ASSERT_GT(bad, 3) << diverged.result.output;
  EXPECT_TRUE(std::regex_search(diverged.result.output, std::regex(R"((on|of) ranks? [01])"))) << diverged.result.output;
  EXPECT_NE(diverged.result.output.find("no checkpoint of this state is saved"), std::string::npos);
  EXPECT_EQ(diverged.losses.size(), static_cast<size_t>(bad - 3)) << "the run went on after the NaN";
  EXPECT_EQ(tracker(save), std::to_string(bad - 1));
  char name[32];
  std::snprintf(name, sizeof(name), "/iter_%07lld", static_cast<long long>(bad));
  EXPECT_FALSE(fs::exists(save + name)) << "the non-finite state was saved";
  // It loads (with nothing left to train: its weights are finite, but diverged).
  TrainRun resumed = testing::train(2, kFaultsModel + " --use-torch-fsdp2 --load " + save + " --train-iters " + std::to_string(bad - 1));
  EXPECT_EQ(resumed.result.status, 0) << "the last good checkpoint does not load:\n" << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("resuming at iteration " + std::to_string(bad - 1)), std::string::npos) << resumed.result.output;

  // A NaN at the first iteration: nothing is saved at all.
  TrainRun first = testing::train(1, kFaultsModel + " --train-iters 3 --init-method-std 1e30 --save " + dir + "/never");
  EXPECT_NE(first.result.status, 0);
  EXPECT_EQ(stopped_at(first.result.output), 1) << first.result.output;
  EXPECT_TRUE(std::regex_search(first.result.output, std::regex(R"((on|of) rank 0\b)"))) << first.result.output;
  EXPECT_FALSE(fs::exists(dir + "/never/latest_checkpointed_iteration.txt"));
  // Megatron's switch turns the guard off; clipping still refuses non-finite gradients.
  const std::string off = kFaultsModel + " --train-iters 3 --init-method-std 1e30 --no-check-for-nan-in-loss-and-grad";
  TrainRun unchecked = testing::train(1, off + " --clip-grad 0");
  EXPECT_EQ(unchecked.result.status, 0) << unchecked.result.output;
  TrainRun clipped = testing::train(1, off);
  EXPECT_NE(clipped.result.status, 0);
  EXPECT_NE(clipped.result.output.find("non-finite gradients cannot be clipped (--clip-grad"), std::string::npos)
      << clipped.result.output;
}

TEST(Faults, ACheckpointOfAnotherModelIsRefusedNamingTheFlags) {
  const std::string dir = testing::scratch_dir(), save = dir + "/ckpt";
  TrainRun saved = testing::train(1, kFaultsModel + " --train-iters 2 --save " + save);
  ASSERT_EQ(saved.result.status, 0) << saved.result.output;
  const std::string load = " --train-iters 3 --load " + save;
  struct Case {
    std::string flags, message;
  };
  const std::string tied = std::regex_replace(kFaultsModel, std::regex(" --untie-embeddings-and-output-weights"), "");
  const std::vector<Case> refused = {
      {kFaultsModel + " --num-layers 1", "--num-layers is 2 there and 1 here"},
      {kFaultsModel + " --num-attention-heads 8", "--num-attention-heads is 4 there and 8 here"},
      {kFaultsModel + " --rotary-base 5000", "--rotary-base is 10000"},
      {tied, "--untie-embeddings-and-output-weights is true there and false here"},
      {tied + " --finetune", "--untie-embeddings-and-output-weights is true there and false here"},
      {tied + " --dist-ckpt-strictness log_unexpected", "--dist-ckpt-strictness log_unexpected needs --finetune"},
  };
  for (const auto& c : refused) {
    TrainRun run = testing::train(1, c.flags + load);
    EXPECT_NE(run.result.status, 0) << c.flags;
    EXPECT_NE(run.result.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n" << run.result.output;
    EXPECT_EQ(run.result.output.find("resuming at iteration"), std::string::npos) << run.result.output;
  }
  // Asked for explicitly, fine-tuning loads what the model has and names what it leaves out.
  TrainRun adapted = testing::train(1, tied + " --finetune --dist-ckpt-strictness log_unexpected" + load);
  EXPECT_EQ(adapted.result.status, 0) << adapted.result.output;
  EXPECT_NE(adapted.result.output.find("tensors the model does not have: "), std::string::npos) << adapted.result.output;
  // The sequence length (and with it RoPE's max positions) changes no weight.
  TrainRun longer = testing::train(1, std::regex_replace(kFaultsModel, std::regex("--seq-length 16"), "--seq-length 32") + load);
  EXPECT_EQ(longer.result.status, 0) << longer.result.output;
  EXPECT_NE(longer.result.output.find("resuming at iteration 2"), std::string::npos) << longer.result.output;
}

// Note [Index checksums]: an index file changed after the save, or a directory that holds
// another iteration than the tracker names, is refused by name.
TEST(Faults, IndexFilesChangedAfterTheSaveAreRefused) {
  const std::string dir = testing::scratch_dir();
  for (const std::string format : {"torch_dcp", "torch_dist"}) {
    const std::string save = dir + "/" + format;
    TrainRun saved = testing::train(1, kFaultsModel + " --train-iters 2 --save " + save + " --ckpt-format " + format);
    ASSERT_EQ(saved.result.status, 0) << saved.result.output;
    const std::string index = save + (format == "torch_dcp" ? "/iter_0000002/.metadata" : "/iter_0000002/metadata.json");
    const std::string original = testing::read_file(index);
    std::ofstream(index, std::ios::app) << ' ';
    TrainRun edited = testing::train(1, kFaultsModel + " --train-iters 3 --load " + save);
    EXPECT_NE(edited.result.status, 0);
    EXPECT_NE(edited.result.output.find(index + " has changed since megacpp wrote it"), std::string::npos) << edited.result.output;
    std::ofstream(index, std::ios::trunc) << original;
    fs::copy(save + "/iter_0000002", save + "/iter_0000005", fs::copy_options::recursive);
    std::ofstream(save + "/latest_checkpointed_iteration.txt", std::ios::trunc) << "5";
    TrainRun renamed = testing::train(1, kFaultsModel + " --train-iters 6 --load " + save);
    EXPECT_NE(renamed.result.status, 0);
    EXPECT_NE(renamed.result.output.find("megacpp_checksums.json: it holds iteration 2, not 5"), std::string::npos)
        << renamed.result.output;
    TrainRun intact = testing::train(1, kFaultsModel + " --train-iters 3 --load " + save + " --ckpt-step 2");
    EXPECT_EQ(intact.result.status, 0) << intact.result.output;
  }
}

// A tracker that is a directory or empty is named with what it should hold (issue 31).
TEST(Faults, ATrackerThatIsNoIterationIsNamedWithWhatItShouldHold) {
  const std::string dir = testing::scratch_dir();
  const std::string tracker_file = dir + "/latest_checkpointed_iteration.txt";
  auto error = [&] {
    try {
      io::checkpoint::read_tracker(dir);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  fs::create_directories(tracker_file);
  EXPECT_EQ(error(), tracker_file + ": is not a file: the checkpoint tracker holds the latest iteration ('release' or a number, "
                                    "as --save writes it); remove it or give another directory");
  fs::remove(tracker_file);
  std::ofstream(tracker_file).flush();
  EXPECT_EQ(error(), tracker_file + ": is empty: expected an iteration number or 'release' (what --save writes there)");
}

TEST(Faults, OverflowingBatchArithmeticIsRefusedByFlag) {
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {" --micro-batch-size 4611686018427387904 --train-iters 1", "--micro-batch-size (4611686018427387904) x"},
      {" --eval-iters 4611686018427387904 --eval-interval 1 --train-iters 2", "--eval-iters (4611686018427387904)"},
      {" --train-iters 9223372036854775807 --eval-interval 1", "--train-iters / --eval-interval (9223372036854775807) + 1"},
      {" --train-iters 4611686018427387904 --micro-batch-size 2", "--train-iters (4611686018427387904) x global batch (2)"},
  };
  const std::string model = std::regex_replace(kFaultsModel, std::regex(" --micro-batch-size 2| --eval-iters 0"), "");
  for (const auto& c : cases) {
    TrainRun run = testing::train(1, model + c.flags);
    EXPECT_NE(run.result.status, 0) << c.flags;
    EXPECT_NE(run.result.output.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n" << run.result.output;
    EXPECT_NE(run.result.output.find("overflows a 64-bit integer"), std::string::npos) << run.result.output;
  }
}

// Note [Re-saving an iteration]: a kill at each step of replacing iter_4 leaves a checkpoint
// that loads, and the next save tidies up.
TEST(Faults, AReSaveKilledBetweenItsRenamesLeavesALoadableCheckpoint) {
  for (const std::string step : {"after-rename-to-old", "after-rename-into-place"}) {
    const std::string dir = testing::scratch_dir(), save = dir + "/ckpt";
    const std::string flags = kFaultsModel + " --save " + save + " --save-interval 2";
    TrainRun first = testing::train(1, flags + " --train-iters 4");
    ASSERT_EQ(first.result.status, 0) << first.result.output;
    TrainRun killed = train_with_environment("MEGACPP_TEST_KILL_AT=" + step, flags + " --load " + save + " --ckpt-step 2 --train-iters 4");
    EXPECT_NE(killed.result.status, 0) << step << "\n" << killed.result.output;
    EXPECT_EQ(tracker(save), "4") << step;
    TrainRun resumed = testing::train(1, flags + " --load " + save + " --train-iters 6");
    ASSERT_EQ(resumed.result.status, 0) << step << "\n" << resumed.result.output;
    EXPECT_NE(resumed.result.output.find("resuming at iteration 4"), std::string::npos) << resumed.result.output;
    EXPECT_EQ(tracker(save), "6") << step;
    EXPECT_TRUE(fs::is_directory(save + "/iter_0000004")) << step;
    for (const char* leftover : {"/iter_0000004.old", "/iter_0000004.tmp"}) EXPECT_FALSE(fs::exists(save + leftover)) << step;
  }
}

TEST(Faults, ASecondJobOnTheSameSaveDirectoryIsRefused) {
  const std::string dir = testing::scratch_dir(), save = dir + "/ckpt";
  std::vector<std::string> argv{MEGACPP_RUN_BINARY, "--nproc-per-node", "1", "--master-port", "0", MEGACPP_TRAIN_BINARY};
  std::istringstream words(kFaultsModel + " --train-iters 2 --save " + save);
  for (std::string w; words >> w;) argv.push_back(w);
  testing::StreamingProcess first(argv, {{{"MEGACPP_TEST_SAVE_DELAY_MS", "4000"}}, {}});
  for (int i = 0; i < 600 && !fs::exists(save + "/iter_0000002.tmp/__0_0.distcp"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(save + "/iter_0000002.tmp/__0_0.distcp")) << first.output();
  TrainRun second = testing::train(1, kFaultsModel + " --train-iters 3 --save " + save);
  EXPECT_NE(second.result.status, 0);
  EXPECT_NE(second.result.output.find("--save " + save + " is in use by another job (host "), std::string::npos)
      << second.result.output;
  ASSERT_TRUE(first.wait(std::chrono::seconds(60))) << first.output();
  EXPECT_EQ(first.exit_code(), 0) << first.output();
  EXPECT_EQ(tracker(save), "2");
}

// Megatron's --exit-duration-in-mins stops every rank after the same iteration, saving first;
// --no-save-rng leaves the RNG states out, and loading such a checkpoint needs --no-load-rng.
TEST(Faults, ExitDurationStopsTheRunWithACheckpoint) {
  const std::string dir = testing::scratch_dir(), save = dir + "/ckpt";
  TrainRun run = testing::train(2, kFaultsModel + " --use-torch-fsdp2 --train-iters 1000000 --exit-duration-in-mins 0.02 --no-save-rng "
                                            "--save " + save);
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.result.output, m, std::regex(R"(exiting program after [0-9.]+ minutes at iteration (\d+))")))
      << run.result.output;
  EXPECT_EQ(testing::read_file(save + "/latest_checkpointed_iteration.txt"), m[1].str());
  EXPECT_LT(std::stoll(m[1]), 1000000);
  TrainRun refused = testing::train(2, kFaultsModel + " --use-torch-fsdp2 --train-iters 1000000 --load " + save);
  EXPECT_NE(refused.result.status, 0);
  EXPECT_NE(refused.result.output.find("add --no-load-rng"), std::string::npos) << refused.result.output;
  TrainRun resumed = testing::train(2, kFaultsModel + " --use-torch-fsdp2 --train-iters " + m[1].str() + " --load " + save + " --no-load-rng");
  EXPECT_EQ(resumed.result.status, 0) << resumed.result.output;
}

std::vector<std::string> launch_argv(const std::vector<std::string>& launcher_flags, const std::string& train_flags) {
  std::vector<std::string> argv{MEGACPP_RUN_BINARY};
  argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
  argv.push_back(MEGACPP_TRAIN_BINARY);
  std::istringstream words(train_flags);
  for (std::string w; words >> w;) argv.push_back(w);
  return argv;
}

// Sends SIGSTOP to the job's rank 1 once iteration 3 is logged; its pid, or -1.
pid_t stop_rank_1_after_iteration_3(testing::StreamingProcess& job) {
  if (!job.wait_for_output("iteration        3/", std::chrono::seconds(120))) return -1;
  for (pid_t child : testing::child_pids(job.pid())) {
    if (testing::initial_environment_value(child, "RANK") == "1") {
      ::kill(child, SIGSTOP);
      return child;
    }
  }
  return -1;
}

// Note [Hang detection]: a stopped rank is named, with its pid and phase, within the timeout,
// and the job ends instead of waiting for --distributed-timeout-minutes.
TEST(Faults, AStoppedRankIsNamedWithinTheHangTimeout) {
  testing::StreamingProcess job(launch_argv({"--nproc-per-node", "2", "--master-port", "0", "--hang-timeout-seconds", "4"},
                                            kFaultsModel + " --use-torch-fsdp2 --train-iters 100000"));
  const pid_t rank1 = stop_rank_1_after_iteration_3(job);
  ASSERT_GT(rank1, 0) << job.output();
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.wait(std::chrono::seconds(60))) << job.output();
  const double seconds = std::chrono::duration<double>(job.exit_time() - stopped).count();
  EXPECT_NE(job.exit_code(), 0);
  const std::string output = job.output();
  EXPECT_NE(output.find("no progress for --hang-timeout-seconds 4: rank 1 (pid " + std::to_string(rank1) + ", stopped by a signal) in 'iteration"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("Waiting for it: rank 0"), std::string::npos) << output;
  EXPECT_LT(seconds, 4 + 1 + 5 + 5) << "timeout, a poll, the grace period and some slack";
}

// Note [Hang detection] with the launcher's defaults: when the collective timeout
// (--distributed-timeout-minutes 0.25, 15 s, under the default --hang-timeout-seconds 300) fails
// the rank that only waited, the launcher names the stopped rank it waited for.
TEST(Faults, TheCollectiveTimeoutNamesTheStoppedRankItWaitedFor) {
  testing::StreamingProcess job(launch_argv({"--nproc-per-node", "2", "--master-port", "0"},
                                            kFaultsModel + " --use-torch-fsdp2 --train-iters 100000 --distributed-timeout-minutes 0.25"));
  const pid_t rank1 = stop_rank_1_after_iteration_3(job);
  ASSERT_GT(rank1, 0) << job.output();
  ASSERT_TRUE(job.wait(std::chrono::seconds(15 + 60))) << job.output();
  EXPECT_NE(job.exit_code(), 0);
  const std::string output = job.output();
  EXPECT_NE(output.find("megacpp-run: rank 0 failed while these ranks were behind it (a collective that timed out there waited for them): rank 1 (pid " +
                        std::to_string(rank1) + ", stopped by a signal) in 'iteration"),
            std::string::npos)
      << output;
}

// A second job on a port in use gets a message that names the port; the first job goes on.
TEST(Faults, ASecondJobOnTheSamePortIsRefusedAndTheFirstGoesOn) {
  const std::string port = std::to_string(testing::free_port());
  const std::string dir = testing::scratch_dir();
  const std::string flags = kFaultsModel + " --use-torch-fsdp2 --train-iters 3 --save " + dir + "/ckpt --save-interval 1";
  testing::StreamingProcess first(launch_argv({"--nproc-per-node", "2", "--master-port", port}, flags),
                                  {{{"MEGACPP_TEST_SAVE_DELAY_MS", "3000"}}, {}});
  ASSERT_TRUE(first.wait_for_output("iteration        1/", std::chrono::seconds(120))) << first.output();
  testing::StreamingProcess second(launch_argv({"--nproc-per-node", "2", "--master-port", port}, kFaultsModel + " --use-torch-fsdp2 --train-iters 3"));
  ASSERT_TRUE(second.wait(std::chrono::seconds(120))) << second.output();
  EXPECT_NE(second.exit_code(), 0);
  const std::string refused = second.output();
  EXPECT_NE(refused.find("--master-port " + port + " is taken on this host by another job's megacpp-run (pid " +
                         std::to_string(first.pid()) + ")"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("[rank"), std::string::npos) << "a rank of the refused job started:\n" << refused;
  // A rank started by another launcher (torchrun's variables) reaches the first job's store and
  // leaves it untouched: that job already has a rank 1.
  testing::StreamingProcess stray({MEGACPP_TRAIN_BINARY, "--model-type", "llama", "--mock-data", "--tokenizer-type", "NullTokenizer",
                                   "--vocab-size", "127", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
                                   "--train-iters", "3", "--use-torch-fsdp2"},
                                  {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
                                   {}});
  ASSERT_TRUE(stray.wait(std::chrono::seconds(120))) << stray.output();
  EXPECT_NE(stray.exit_code(), 0);
  EXPECT_NE(stray.output().find("MASTER_PORT=" + port + " already has a rank 1: it belongs to another job started on the same port"),
            std::string::npos)
      << stray.output();
  ASSERT_TRUE(first.wait(std::chrono::seconds(120))) << first.output();
  EXPECT_EQ(first.exit_code(), 0) << first.output();
  EXPECT_NE(first.output().find("iteration        3/"), std::string::npos) << first.output();
}

// Note [One job per port]: two jobs started on one port 0 to 1 s apart. One trains all its
// iterations and exits 0; the other is refused before it starts a rank, naming the port and the
// launcher that holds it. Whenever the second starts later, the first is the one that trains.
TEST(Faults, OfTwoJobsOnOnePortOneTrainsAndTheOtherIsRefusedAtEveryStagger) {
  const std::string dir = testing::scratch_dir();
  // The last save takes 1.5 s more: each job still runs when the other starts.
  const testing::ProcessEnvironment slow_save{{{"MEGACPP_TEST_SAVE_DELAY_MS", "1500"}}, {}};
  for (int stagger_ms : {0, 300, 600, 1000}) {
    SCOPED_TRACE("stagger " + std::to_string(stagger_ms) + " ms");
    const std::string port = std::to_string(testing::free_port());
    const auto job = [&](const std::string& name) {
      return launch_argv({"--nproc-per-node", "2", "--master-port", port},
                         kFaultsModel + " --use-torch-fsdp2 --train-iters 3 --save-interval 3 --save " + dir + "/" + name +
                             std::to_string(stagger_ms));
    };
    testing::StreamingProcess first(job("first"), slow_save);
    std::this_thread::sleep_for(std::chrono::milliseconds(stagger_ms));
    testing::StreamingProcess second(job("second"), slow_save);
    ASSERT_TRUE(first.wait(std::chrono::seconds(120))) << first.output();
    ASSERT_TRUE(second.wait(std::chrono::seconds(120))) << second.output();
    const bool first_trained = first.exit_code() == 0;
    if (stagger_ms > 0) EXPECT_TRUE(first_trained) << first.output();
    testing::StreamingProcess& trained = first_trained ? first : second;
    testing::StreamingProcess& refused = first_trained ? second : first;
    EXPECT_EQ(trained.exit_code(), 0) << trained.output();
    EXPECT_NE(trained.output().find("iteration        3/"), std::string::npos) << trained.output();
    EXPECT_NE(refused.exit_code(), 0) << refused.output();
    EXPECT_NE(refused.output().find("--master-port " + port + " is taken on this host by another job's megacpp-run (pid " +
                                    std::to_string(trained.pid()) + ")"),
              std::string::npos)
        << refused.output();
    EXPECT_EQ(refused.output().find("[rank"), std::string::npos) << "a rank of the refused job started:\n" << refused.output();
  }
}

}  // namespace
}  // namespace megacpp
