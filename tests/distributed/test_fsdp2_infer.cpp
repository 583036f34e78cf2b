// megacpp-infer, ROLL's fsdp2_infer (Note [Forward-only sharded inference]): a Qwen2-style
// Hugging Face folder scores JSON lines of token ids of different lengths on 1 rank without
// FSDP, with FSDP on 2 and 4 ranks (built on the meta device), HSDP 2x2 and Ulysses on 2 ranks:
// the same log-probs within 1e-5, and tests/reference/hf_forward.py's (NumPy, transformers' math
// on the folder) within 1e-4. A checkpoint of the folder's weights (--load) scores the same, and
// LoRA adapters from --lora-load over their base from --load score as the adapted model. Bad
// input is refused naming the line and flag, and an earlier output is left in place.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/command.h"
#include "tests/support/hf_reference.h"
#include "tests/support/lora_runs.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using Rows = std::vector<std::vector<double>>;

// The sequences scored, of 1 to 16 tokens (--seq-length 16), one of them as an object.
const std::vector<std::vector<int64_t>> kSequences = {
    {3, 17, 42, 8, 25, 31, 4, 49, 12, 0, 19, 33}, {5, 5, 6}, {44}, {10, 20, 30, 40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15},
    {7, 28, 36, 2, 14}, {21, 22, 23, 24, 25, 26, 27}};

std::string write_input(const std::string& dir) {
  std::ostringstream text;
  for (size_t i = 0; i < kSequences.size(); ++i) {
    const nlohmann::json ids = kSequences[i];
    text << (i == 4 ? nlohmann::json{{"input_ids", ids}, {"answer", "kept out"}}.dump() : ids.dump()) << "\n";
    if (i == 2) text << "\n";  // blank lines are skipped
  }
  return testing::write_file(dir, "sequences.jsonl", text.str());
}

std::string write_folder(const std::string& dir) {
  testing::write_qwen2_folder(dir + "/qwen2", 1ull << 30);
  return dir + "/qwen2";
}

struct Scores {
  testing::CommandResult result;
  Rows log_probs, entropy;
};

Scores infer(int ranks, const std::string& flags, const std::string& output) {
  Scores scores;
  scores.result = testing::run_command(std::string(MEGACPP_RUN_BINARY) + " --nproc-per-node " + std::to_string(ranks) +
                                       " --master-port 0 " + MEGACPP_INFER_BINARY + " --output " + output + " " + flags);
  if (scores.result.status != 0) return scores;
  std::istringstream lines(testing::read_file(output));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    scores.log_probs.push_back(j.at("log_probs").get<std::vector<double>>());
    if (j.contains("entropy")) scores.entropy.push_back(j.at("entropy").get<std::vector<double>>());
  }
  return scores;
}

void expect_close(const Rows& expected, const Rows& actual, double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i].size(), expected[i].size()) << what << ", sequence " << i;
    for (size_t t = 0; t < expected[i].size(); ++t) {
      EXPECT_NEAR(actual[i][t], expected[i][t], tolerance * std::max(1.0, std::abs(expected[i][t])))
          << what << ", sequence " << i << ", position " << t;
    }
  }
}

// hf_forward.py's log-probs, one sequence at a time (its batches are of one length).
Rows reference_log_probs(const std::string& hf, const std::string& dir) {
  Rows rows;
  for (const auto& sequence : kSequences) {
    std::string tokens;
    for (int64_t id : sequence) tokens += (tokens.empty() ? "" : ",") + std::to_string(id);
    const std::string out = dir + "/reference.json";
    const auto run = testing::run_command(testing::reference_script("hf_forward.py") + " " + hf + " --tokens " + tokens +
                                          " --log-probs-out " + out);
    EXPECT_EQ(run.status, 0) << run.output;
    rows.push_back(nlohmann::json::parse(testing::read_file(out)).at(0).get<std::vector<double>>());
  }
  return rows;
}

const std::string kFlags = " --tokenizer-type NullTokenizer --vocab-size 40 --seq-length 16 --seed 5";

TEST(Fsdp2Infer, EveryLayoutScoresAsOneRankAndAsTransformersMath) {
  const std::string dir = testing::scratch_dir();
  const std::string hf = write_folder(dir), input = write_input(dir);
  const std::string model = "--input " + input + kFlags + " --init-from-hf-path " + hf;
  const Scores one = infer(1, model + " --infer-batch-size 2 --calculate-entropy", dir + "/one.jsonl");
  ASSERT_EQ(one.result.status, 0) << one.result.output;
  ASSERT_EQ(one.log_probs.size(), kSequences.size());
  EXPECT_EQ(one.log_probs[2].size(), 0u) << "one token: nothing to score";
  EXPECT_EQ(one.entropy.size(), kSequences.size());
  expect_close(reference_log_probs(hf, dir), one.log_probs, 1e-4, "1 rank against hf_forward.py");

  const std::string hsdp = testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  const std::vector<std::pair<std::string, Scores>> layouts = {
      {"FSDP on 2 ranks", infer(2, model + " --use-torch-fsdp2 --calculate-entropy", dir + "/fsdp2.jsonl")},
      {"FSDP on 4 ranks, meta device, one sequence per forward",
       infer(4, model + " --use-torch-fsdp2 --init-model-with-meta-device --infer-batch-size 1", dir + "/fsdp4.jsonl")},
      {"HSDP 2x2", infer(4, model + hsdp, dir + "/hsdp.jsonl")},
      {"Ulysses on 2 ranks", infer(2, model + " --use-torch-fsdp2 --context-parallel-size 2 --calculate-entropy", dir + "/ulysses.jsonl")},
      {"TP 2 x FSDP 2", infer(4, model + " --tensor-model-parallel-size 2 --use-torch-fsdp2 --calculate-entropy", dir + "/tp.jsonl")},
      {"TP 2 with sequence parallelism (odd lengths padded)",
       infer(2, model + " --tensor-model-parallel-size 2 --sequence-parallel --calculate-entropy", dir + "/tp-sp.jsonl")},
  };
  for (const auto& [what, run] : layouts) {
    ASSERT_EQ(run.result.status, 0) << what << "\n" << run.result.output;
    expect_close(one.log_probs, run.log_probs, 1e-5, what);
    if (!run.entropy.empty()) expect_close(one.entropy, run.entropy, 1e-5, what + " (entropy)");
  }

  // The folder's weights as a checkpoint (megacpp-convert import): --load scores the same.
  const auto imported = testing::convert("import --input " + hf + " --save " + dir + "/imported");
  ASSERT_EQ(imported.status, 0) << imported.output;
  const Scores loaded = infer(2, "--input " + input + kFlags + " --load " + dir + "/imported --use-checkpoint-args --use-torch-fsdp2",
                              dir + "/loaded.jsonl");
  ASSERT_EQ(loaded.result.status, 0) << loaded.result.output;
  expect_close(one.log_probs, loaded.log_probs, 1e-5, "--load of the imported checkpoint");
}

TEST(Fsdp2Infer, LoraAdaptersOverTheirBaseScoreAsTheAdaptedModel) {
  const std::string dir = testing::scratch_dir(), input = write_input(dir);
  const std::string model = testing::kLoraTestModel + "--lr 1e-2 ";
  const auto base = testing::train(1, model + "--train-iters 2 --save " + dir + "/base");
  ASSERT_EQ(base.result.status, 0) << base.result.output;
  const auto adapted = testing::train(1, model + testing::kLoraTestAdapters + " --train-iters 3 --load " + dir + "/base --save " + dir + "/adapters");
  ASSERT_EQ(adapted.result.status, 0) << adapted.result.output;
  const std::string flags = "--input " + input + " " + model + testing::kLoraTestAdapters + " --load " + dir + "/base --use-torch-fsdp2";
  const Scores scores = infer(2, flags + " --lora-load " + dir + "/adapters", dir + "/lora.jsonl");
  ASSERT_EQ(scores.result.status, 0) << scores.result.output;
  ASSERT_EQ(scores.log_probs.size(), kSequences.size());
  for (size_t i = 0; i < kSequences.size(); ++i) {
    // megacpp's forward of the adapted checkpoint, unsharded (tests/support/hf_reference.h).
    const at::Tensor logits = testing::checkpoint_logits(dir + "/adapters", {kSequences[i]}, nullptr, dir + "/base")[0].to(torch::kDouble);
    const at::Tensor log_p = torch::log_softmax(logits, -1);
    for (size_t t = 0; t + 1 < kSequences[i].size(); ++t) {
      const double expected = log_p[static_cast<int64_t>(t)][kSequences[i][t + 1]].item<double>();
      EXPECT_NEAR(scores.log_probs[i][t], expected, 1e-5 * std::max(1.0, std::abs(expected))) << "sequence " << i << ", position " << t;
    }
  }
  const Scores without = infer(1, flags, dir + "/without.jsonl");
  EXPECT_NE(without.result.status, 0);
  EXPECT_NE(without.result.output.find("holds no LoRA adapters; give their checkpoint with --lora-load"), std::string::npos)
      << without.result.output;
}

TEST(Fsdp2Infer, RefusesBadInputNamingItAndKeepsAnEarlierOutput) {
  const std::string dir = testing::scratch_dir();
  const std::string hf = write_folder(dir);
  const std::string output = testing::write_file(dir, "out.jsonl", "earlier output\n");
  auto refused = [&](int ranks, const std::string& lines, const std::string& flags, const std::string& message) {
    const std::string input = testing::write_file(dir, "bad.jsonl", lines);
    const Scores run = infer(ranks, "--input " + input + kFlags + " " + flags, output);
    EXPECT_NE(run.result.status, 0) << message;
    EXPECT_NE(run.result.output.find(message), std::string::npos) << run.result.output;
    EXPECT_EQ(testing::read_file(output), "earlier output\n") << message;
  };
  const std::string folder = "--init-from-hf-path " + hf;
  refused(2, "[1, 2]\n[3, 50]\n", folder + " --use-torch-fsdp2", "bad.jsonl line 2: token id 50 is outside the model's vocabulary of 50");
  refused(1, "[1, 2]\n" + nlohmann::json(std::vector<int64_t>(17, 1)).dump() + "\n", folder,
          "line 2: 17 tokens, longer than the context of 16 (--seq-length)");
  refused(1, "{\"ids\": [1]}\n", folder, "line 1: expected a list of token ids or an object with \"input_ids\"");
  refused(1, "[1, 2.5]\n", folder, "line 1: token ids are integers, got 2.5");
  refused(1, "[1, 2]\n", "", "the weights come from --load (a checkpoint) or --init-from-hf-path");
  refused(1, "[1, 2]\n", folder + " --infer-batch-size 0", "--infer-batch-size must be positive");
  refused(1, "[1, 2]\n", folder + " --save " + dir + "/ckpt", "--save: megacpp-infer saves no checkpoint");
  refused(1, "[1, 2]\n", "--load " + dir + "/nothing --use-torch-fsdp2", "--load " + dir + "/nothing has no checkpoint");
}

}  // namespace
}  // namespace megacpp
