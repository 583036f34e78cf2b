// megacpp-grpo (rl/grpo_run.h) end to end on a tiny Llama with byte-level tokens: with the
// rollout colocated on 2 ranks (saving in the background) and on a rank of its own beside 2
// trainer ranks, it logs the held-out evaluation before and after and one line per step, saves
// the actor where megacpp-train's --load reads it, and a saved run resumes at its iteration; bad
// input (and megacpp-train's flags that mean nothing to it) is refused naming the flag, file and
// line, with nothing saved; beside tensor parallelism a run takes the steps of its data-parallel
// layout without TP; the learning rate follows Megatron's schedule over the optimizer steps; a
// rollout worker that never joins is named within the hang timeout. (ROLL's YAML:
// test_grpo_rlvr_config.cpp.)
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/command.h"
#include "tests/support/distributed_test.h"
#include "tests/support/grpo_runs.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::count_matches;
using testing::grpo;
using testing::kGrpoArchitecture;
using testing::kGrpoModel;
using testing::write_sum_prompts;

TEST(GrpoProgram, TrainsWithTheRolloutColocatedOrOnARankOfItsOwnAndSavesTheActor) {
  const std::string dir = testing::scratch_dir();
  const std::string data = " --prompts " + write_sum_prompts(dir, "train.jsonl", 20) + " --eval-prompts " + write_sum_prompts(dir, "eval.jsonl", 6) +
                           " --rollout-batch-size 4 --num-return-sequences-in-group 4 --response-length 3 --lr 1e-3";
  for (const auto& [ranks, layout] : {std::pair<int, std::string>{2, " --async-save"}, {3, " --rollout-ranks 1"}}) {
    const std::string save = dir + "/actor" + std::to_string(ranks);
    const auto run = grpo(ranks, data + layout + " --train-iters 3 --save " + save + " --save-interval 2");
    ASSERT_EQ(run.status, 0) << run.output;
    const std::string step = R"(grpo step \d/3 \| reward [0-9.]+ \| response length [0-9.]+ \| kl -?[0-9.]+ \| entropy [0-9.]+ \| )"
                             R"(clip fraction [0-9.]+ \| policy loss -?[0-9.]+ \| learning rate 1\.0000E-03 \| weight sync [0-9.]+ s, [0-9.]+ KiB)";
    EXPECT_EQ(count_matches(run.output, step), 3) << run.output;
    EXPECT_EQ(count_matches(run.output, R"(grpo eval \| step [03] \| held-out exact-answer reward [0-9.]+ \(\d of 6 prompts, greedy\))"), 2)
        << run.output;
    if (ranks == 3) {
      EXPECT_NE(run.output.find("rollout on rank(s) 2"), std::string::npos) << run.output;
      EXPECT_EQ(count_matches(run.output, R"(KiB in \d+ chunk\(s\))"), 3) << "the weights broadcast to the worker\n" << run.output;
    }
    EXPECT_EQ(testing::read_file(save + "/latest_checkpointed_iteration.txt"), "3");
    EXPECT_TRUE(std::filesystem::exists(save + "/iter_0000002")) << "--save-interval 2";

    const auto resumed = grpo(ranks, data + layout + " --train-iters 4 --load " + save + " --save " + save);
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_EQ(count_matches(resumed.output, R"(grpo step 4/4 )"), 1) << "resumed at its iteration\n" << resumed.output;
    EXPECT_EQ(count_matches(resumed.output, R"(grpo step [1-3]/4 )"), 0) << resumed.output;
    EXPECT_EQ(testing::read_file(save + "/latest_checkpointed_iteration.txt"), "4");
  }
  const auto loaded = testing::train(1, kGrpoModel + " --mock-data --micro-batch-size 2 --global-batch-size 2 --train-iters 4 --eval-iters 0 "
                                     "--lr 1e-3 --log-interval 1 --load " + dir + "/actor3");
  EXPECT_EQ(loaded.result.status, 0) << "megacpp-train reads the actor's checkpoint\n" << loaded.result.output;
}

TEST(GrpoProgram, RefusesBadInputNamingTheFlagFileAndLine) {
  const std::string dir = testing::scratch_dir();
  const std::string prompts = write_sum_prompts(dir, "train.jsonl", 8);
  const std::string bad_line = testing::write_file(dir, "bad.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": \"2+2=\"}\n");
  const std::string too_long = testing::write_file(dir, "long.jsonl", "{\"prompt\": \"1+1+1+1+1+1+1=\", \"answer\": \"7\"}\n");
  const std::string common = " --rollout-batch-size 4 --response-length 3 --train-iters 2 --save " + dir + "/never";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --prompts " + bad_line, "--prompts " + bad_line + " line 2: expected an object with \"prompt\" and \"answer\" strings"},
      {" --prompts " + too_long, "--prompts " + too_long + " line 1: the prompt has 14 tokens, no room to answer within 13"},
      {" --prompts " + prompts + " --rollout-ranks 2", "--rollout-ranks 2 leaves no trainer rank in a world of 2"},
      {" --prompts " + prompts + " --rollout-batch-size 3", "--rollout-batch-size 3 does not divide among the 2 data-parallel trainer ranks"},
      {" --prompts " + prompts + " --num-return-sequences-in-group 1", "--num-return-sequences-in-group 1: GRPO's advantages compare"},
      {" --prompts " + prompts + " --kl-loss-type k9", "kl_penalty k9: expected kl (k1), abs, mse (k2) or low_var_kl (k3)"},
      {"", "--prompts (JSON lines {\"prompt\": ..., \"answer\": ...}) is required"},
      {" --prompts " + prompts + " --ppo-mini-batch-size 3", "--ppo-mini-batch-size 3 does not divide --rollout-batch-size 4"},
      {" --prompts " + prompts + " --ppo-mini-batch-size 1", "--ppo-mini-batch-size 1 does not divide among the 2 data-parallel trainer ranks"},
      {" --prompts " + prompts + " --ppo-micro-batch-size 3 --gradient-accumulation-steps 1",
       "--ppo-micro-batch-size x --gradient-accumulation-steps (3 responses per rank) does not divide each data-parallel rank's 8 responses"},
      {" --prompts " + prompts + " --ppo-mini-batch-size 2 --gradient-accumulation-steps 1",
       "--ppo-mini-batch-size (verl's) and --gradient-accumulation-steps (ROLL's) both size the mini-batch; give one"},
      {" --prompts " + prompts + " --micro-batch-size 4",
       "--micro-batch-size: not read by megacpp-grpo (responses per forward of the update: --ppo-micro-batch-size)"},
      {" --prompts " + prompts + " --loss-scale=1024",
       "--loss-scale: not read by megacpp-grpo (megacpp-grpo does not scale the loss, which fp16 needs; use --bf16)"},
      {" --prompts " + prompts + " --data-path " + dir + "/corpus", "--data-path: not read by megacpp-grpo (the prompts are the data: --prompts)"},
      {" --prompts " + prompts + " --context-parallel-size 2 --importance-sampling seq",
       "--importance-sampling seq: a response's ratio needs all its positions, which --context-parallel-size splits over ranks"},
  };
  for (const auto& [flags, message] : cases) {
    const auto run = grpo(2, common + flags);
    EXPECT_NE(run.status, 0) << flags;
    EXPECT_NE(run.output.find(message), std::string::npos) << flags << "\n" << run.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/never/latest_checkpointed_iteration.txt")) << "nothing saved";
}

// Each number of each step line and of the evaluations (timings and sync sizes left out), with
// how many decimals it was printed with.
std::vector<std::pair<double, int>> figures_of(const std::string& output) {
  const std::regex line(R"(grpo step \d+/\d+ \| reward [^\n]*\| policy loss -?[0-9.]+|grpo eval [^\n]*)"), number(R"(-?\d+(\.(\d+))?)");
  std::vector<std::pair<double, int>> numbers;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    const std::string text = it->str();
    for (auto n = std::sregex_iterator(text.begin(), text.end(), number); n != std::sregex_iterator(); ++n) {
      numbers.emplace_back(std::stod(n->str()), static_cast<int>((*n)[2].length()));
    }
  }
  return numbers;
}

// The same figures within one rank's in their printed precision (a last digit may round the
// other way) and the same final parameters.
void expect_same_grpo_run(const testing::CommandResult& reference, const std::string& reference_params, const testing::CommandResult& run,
                          const std::string& params, const std::string& what) {
  ASSERT_EQ(run.status, 0) << what << "\n" << run.output;
  const auto expected = figures_of(reference.output), got = figures_of(run.output);
  ASSERT_EQ(got.size(), expected.size()) << what << "\n" << reference.output << "\n" << run.output;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].first, expected[i].first, 1e-5 * std::abs(expected[i].first) + 1.01 * std::pow(10.0, -expected[i].second))
        << what << ": figure " << i << "\n" << reference.output << "\n" << run.output;
  }
  testing::expect_same_params(reference_params, params, what);
}

// megacpp-grpo beside tensor parallelism (Megatron's TP for the actor, a whole rollout copy) or
// Ulysses: the same step and evaluation figures and final parameters as the layout without it —
// TP 2 as one rank, TP 2 + SP x FSDP 2 as FSDP 2, TP 2 trainers beside a rollout rank as one
// trainer, and so with LoRA adapters (merged into the rollout's weights); a Ulysses pair as one
// rank, colocated and beside a rollout rank.
// Numbers as tokens (testing::kGrpoNumbersModel, the vocabulary padded to 128 rows on both sides)
// and one-token answers, so that some responses are rewarded from the first step; Adam's epsilon
// far above the gradients makes its step scale with them (as SGD's), so that round-off is not
// amplified into steps of the learning rate's size.
TEST(GrpoProgram, TensorParallelAndUlyssesTrainersTakeTheStepsOfTheirDataParallelLayout) {
  const std::string model = testing::kGrpoNumbersModel;
  const std::string dir = testing::scratch_dir();
  auto sums = [&](const std::string& name, int count) { return testing::write_number_sum_prompts(dir, name, count); };
  const std::string data = " --prompts " + sums("train.jsonl", 20) + " --eval-prompts " + sums("eval.jsonl", 6) +
                           " --rollout-batch-size 8 --num-return-sequences-in-group 8 --response-length 1 --lr 1 --adam-eps 1"
                           " --train-iters 3";
  const std::string tp = " --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64";
  const std::string lora = " --lora-rank 4 --lora-alpha 8 --lora-target-modules all-linear";
  struct Pair {
    int reference_ranks;
    std::string reference;
    int ranks;
    std::string flags, what;
  };
  const std::vector<Pair> pairs = {
      {1, "", 2, tp, "TP 2 against 1 rank"},
      {2, " --use-torch-fsdp2", 4, tp + " --sequence-parallel", "TP 2 + SP x FSDP 2 against FSDP 2"},
      {2, " --rollout-ranks 1", 3, tp + " --rollout-ranks 1", "TP 2 trainers against 1 beside a rollout rank"},
      {2, lora + " --rollout-ranks 1", 3, tp + lora + " --rollout-ranks 1", "LoRA at TP 2 against 1 trainer, beside a rollout rank"},
      {1, "", 2, " --context-parallel-size 2", "Ulysses 2 against 1 rank"},
      {2, " --rollout-ranks 1", 3, " --context-parallel-size 2 --rollout-ranks 1", "a Ulysses pair against 1 trainer, beside a rollout rank"},
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Pair& p = pairs[i];
    const std::string expected_params = dir + "/reference" + std::to_string(i) + ".pt", params = dir + "/tp" + std::to_string(i) + ".pt";
    const auto reference = grpo(p.reference_ranks, data + p.reference + " --dump-final-params " + expected_params, model);
    ASSERT_EQ(reference.status, 0) << reference.output;
    EXPECT_EQ(count_matches(reference.output, R"(grpo step 1/3 \| reward 0\.0000)"), 0) << "rewards from the first step\n" << reference.output;
    const auto run = grpo(p.ranks, data + p.flags + " --dump-final-params " + params, model);
    const bool ulysses = p.flags.find("--context-parallel-size") != std::string::npos;
    EXPECT_NE(run.output.find(ulysses ? "Ulysses 2 (data-parallel 1)" : "TP 2 (data-parallel"), std::string::npos) << run.output;
    EXPECT_EQ(count_matches(run.output, R"(held-out exact-answer reward [0-9.]+ \(\d of 6 prompts)"), 2) << "each answer counted once\n" << run.output;
    expect_same_grpo_run(reference, expected_params, run, params, p.what);
  }
}

// Megatron's schedule over the optimizer steps: two per GRPO step (--ppo-epochs 2), so 8 in 4
// steps; a warmup of 2, then a linear decay to --min-lr over the other 6. Each step line gives the
// rate of its last update, and a run resumed at step 2 goes on where the schedule was. Without a
// --lr-decay-style the rate stays --lr (the first test's lines).
TEST(GrpoProgram, TheLearningRateFollowsMegatronsScheduleOverOptimizerSteps) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = " --prompts " + write_sum_prompts(dir, "train.jsonl", 8) + " --rollout-batch-size 2 --response-length 2 --ppo-epochs 2"
                            " --lr 1e-3 --min-lr 1e-4 --lr-warmup-iters 2 --lr-decay-style linear --save " + dir + "/ckpt";
  const auto run = grpo(1, flags + " --train-iters 4");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::vector<std::string> rates = {"1.0000E-03", "7.0000E-04", "4.0000E-04", "1.0000E-04"};
  for (size_t i = 0; i < rates.size(); ++i) {
    EXPECT_EQ(count_matches(run.output, "grpo step " + std::to_string(i + 1) + R"(/4 \|[^\n]*\| learning rate )" + rates[i]), 1)
        << "step " << i + 1 << "\n" << run.output;
  }
  const auto first = grpo(1, flags + "2 --train-iters 2 --save-interval 2");
  ASSERT_EQ(first.status, 0) << first.output;
  const auto resumed = grpo(1, flags + "2 --train-iters 4 --load " + dir + "/ckpt2");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(count_matches(resumed.output, R"(grpo step 3/4 \|[^\n]*\| learning rate 4\.0000E-04)"), 1) << resumed.output;
  const auto refused = grpo(1, flags + " --train-iters 4 --lr-warmup-samples 8");
  EXPECT_NE(refused.output.find("--lr-warmup-samples: not read by megacpp-grpo (its schedule counts optimizer steps"), std::string::npos)
      << refused.output;
}

// A step that keeps no response takes no optimizer step, and the schedule does not count it (as
// ROLL's scheduler). The difficulty mask keeps only groups with a mean reward in (0.99, 1), so
// every step of the untrained model is skipped. The rate stays the schedule's first, also in a run
// resumed from step 2 (the checkpoint counts the skipped samples; without them step 3 would take
// a later, lower rate).
TEST(GrpoProgram, AStepThatKeepsNoResponseDoesNotMoveTheSchedule) {
  const std::string dir = testing::scratch_dir();
  const std::string flags = " --prompts " + testing::write_number_sum_prompts(dir, "train.jsonl", 12) +
                            " --rollout-batch-size 2 --num-return-sequences-in-group 4 --response-length 1 --difficulty-mask"
                            " --difficulty-low-threshold 0.99 --difficulty-high-threshold 1 --lr 1e-3 --min-lr 1e-4"
                            " --lr-decay-style linear";
  const auto run = grpo(1, flags + " --train-iters 3", testing::kGrpoNumbersModel);
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(count_matches(run.output, R"(grpo step [1-3]/3 \|[^\n]*step skipped[^\n]*\| learning rate 1\.0000E-03)"), 3) << run.output;
  const auto first = grpo(1, flags + " --train-iters 2 --save " + dir + "/ckpt", testing::kGrpoNumbersModel);
  ASSERT_EQ(first.status, 0) << first.output;
  const auto resumed = grpo(1, flags + " --train-iters 3 --load " + dir + "/ckpt", testing::kGrpoNumbersModel);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(count_matches(resumed.output, R"(grpo step 3/3 \|[^\n]*\| learning rate 1\.0000E-03)"), 1) << resumed.output;
}

// A rollout worker that never joins (stopped before its rendezvous) is named by megacpp-run with
// its phase within --hang-timeout-seconds, and the job ends.
TEST(GrpoProgram, ARolloutWorkerThatNeverJoinsIsNamedWithinTheHangTimeout) {
  const std::string dir = testing::scratch_dir();
  std::vector<std::string> argv{MEGACPP_RUN_BINARY, "--nproc-per-node", "3", "--master-port", "0", "--hang-timeout-seconds", "4",
                                MEGACPP_GRPO_BINARY};
  std::istringstream words(kGrpoModel + " --prompts " + write_sum_prompts(dir, "train.jsonl", 8) + " --rollout-ranks 1 --train-iters 2 --response-length 3");
  for (std::string w; words >> w;) argv.push_back(w);
  testing::StreamingProcess job(argv);
  pid_t worker = -1;
  for (int polls = 0; worker < 0 && polls < 2000; ++polls) {
    for (pid_t child : testing::child_pids(job.pid())) {
      if (testing::initial_environment_value(child, "RANK") == "2") worker = child;
    }
    if (worker < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(worker, 0) << job.output();
  ::kill(worker, SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.wait(std::chrono::seconds(60))) << job.output();
  const double seconds = std::chrono::duration<double>(job.exit_time() - stopped).count();
  EXPECT_NE(job.exit_code(), 0);
  EXPECT_NE(job.output().find("rank 2 (pid " + std::to_string(worker) + ", stopped by a signal)"), std::string::npos) << job.output();
  EXPECT_LT(seconds, 4 + 1 + 5 + 5) << "timeout, a poll, the grace period and some slack";
}

// verl's reference for a LoRA actor: the actor with its adapters off, its frozen base. A run
// from a base checkpoint (the adapters start fresh) takes the steps of the run whose reference is
// a second model loaded from a checkpoint of that base with zero adapters (--reference-load).
TEST(GrpoProgram, ALoraActorsReferenceIsItsBaseModel) {
  const std::string dir = testing::scratch_dir();
  const std::string data = " --prompts " + testing::write_number_sum_prompts(dir, "train.jsonl", 20) +
                           " --rollout-batch-size 8 --num-return-sequences-in-group 8 --response-length 1 --adam-eps 1 --kl-coef 0.1";
  const std::string lora = " --lora-rank 4 --lora-alpha 8 --lora-target-modules all-linear";
  const auto base = grpo(1, data + " --lr 0 --train-iters 1 --save " + dir + "/base", testing::kGrpoNumbersModel);
  ASSERT_EQ(base.status, 0) << base.output;
  const auto zero_adapters = grpo(1, data + lora + " --lr 0 --train-iters 1 --lora-save-base --save " + dir + "/zero", testing::kGrpoNumbersModel);
  ASSERT_EQ(zero_adapters.status, 0) << zero_adapters.output;
  const std::string run = data + lora + " --load " + dir + "/base --finetune --lr 1 --ppo-epochs 2 --train-iters 3";
  const auto off = grpo(1, run, testing::kGrpoNumbersModel);
  const auto second = grpo(1, run + " --reference-load " + dir + "/zero", testing::kGrpoNumbersModel);
  ASSERT_EQ(off.status, 0) << off.output;
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(off.output.find("reference: the actor without its LoRA adapters"), std::string::npos) << off.output;
  EXPECT_EQ(second.output.find("reference: the actor without its LoRA adapters"), std::string::npos) << second.output;
  EXPECT_EQ(testing::grpo_step_lines(off.output).size(), 3u) << off.output;
  EXPECT_EQ(testing::grpo_step_lines(off.output), testing::grpo_step_lines(second.output));
  EXPECT_EQ(count_matches(off.output, R"(\| kl 0\.00000 \|)"), 0) << "the actor moves away from its base\n" << off.output;
}

}  // namespace
}  // namespace megacpp
