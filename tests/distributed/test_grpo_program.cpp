// megacpp-grpo (rl/grpo_run.h) end to end on a tiny Llama with byte-level tokens: with the
// rollout colocated on 2 ranks and on a rank of its own beside 2 trainer ranks, it logs the
// held-out evaluation before and after and one line per step, saves the actor where
// megacpp-train's --load reads it, and a saved run resumes at its iteration; bad input is refused
// naming the flag, file and line, with nothing saved.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/command.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

const std::string kModel =
    " --model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48"
    " --tokenizer-type ByteLevelTokenizer --seq-length 16 --max-position-embeddings 16 --seed 3";

std::string write_prompts(const std::string& dir, const std::string& name, int count) {
  std::string lines;
  for (int i = 0; i < count; ++i) {
    lines += "{\"prompt\": \"" + std::to_string(i % 7) + "+" + std::to_string(i % 5) + "=\", \"answer\": \"" + std::to_string(i % 7 + i % 5) +
             "\"}\n";
  }
  return testing::write_file(dir, name, lines);
}

testing::CommandResult grpo(int ranks, const std::string& flags) {
  return testing::run_command(std::string(MEGACPP_RUN_BINARY) + " --nproc-per-node " + std::to_string(ranks) + " --master-port 0 " +
                              MEGACPP_GRPO_BINARY + kModel + " " + flags);
}

int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(GrpoProgram, TrainsWithTheRolloutColocatedOrOnARankOfItsOwnAndSavesTheActor) {
  const std::string dir = testing::scratch_dir();
  const std::string data = " --prompts " + write_prompts(dir, "train.jsonl", 20) + " --eval-prompts " + write_prompts(dir, "eval.jsonl", 6) +
                           " --rollout-batch-size 4 --num-return-sequences-in-group 4 --response-length 3 --lr 1e-3";
  for (const auto& [ranks, layout] : {std::pair<int, std::string>{2, ""}, {3, " --rollout-ranks 1"}}) {
    const std::string save = dir + "/actor" + std::to_string(ranks);
    const auto run = grpo(ranks, data + layout + " --train-iters 3 --save " + save + " --save-interval 2");
    ASSERT_EQ(run.status, 0) << run.output;
    const std::string step = R"(grpo step \d/3 \| reward [0-9.]+ \| response length [0-9.]+ \| kl -?[0-9.]+ \| entropy [0-9.]+ \| )"
                             R"(clip fraction [0-9.]+ \| policy loss -?[0-9.]+ \| weight sync [0-9.]+ s, [0-9.]+ KiB)";
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
  const auto loaded = testing::train(1, kModel + " --mock-data --micro-batch-size 2 --global-batch-size 2 --train-iters 4 --eval-iters 0 "
                                     "--lr 1e-3 --log-interval 1 --load " + dir + "/actor3");
  EXPECT_EQ(loaded.result.status, 0) << "megacpp-train reads the actor's checkpoint\n" << loaded.result.output;
}

TEST(GrpoProgram, RefusesBadInputNamingTheFlagFileAndLine) {
  const std::string dir = testing::scratch_dir();
  const std::string prompts = write_prompts(dir, "train.jsonl", 8);
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
  };
  for (const auto& [flags, message] : cases) {
    const auto run = grpo(2, common + flags);
    EXPECT_NE(run.status, 0) << flags;
    EXPECT_NE(run.output.find(message), std::string::npos) << flags << "\n" << run.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/never/latest_checkpointed_iteration.txt")) << "nothing saved";
}

}  // namespace
}  // namespace megacpp
