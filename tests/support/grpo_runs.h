// megacpp-grpo runs for the program's tests: a tiny Llama with byte-level tokens, prompts of
// written-out sums, the job launched by megacpp-run, and the figures its log prints.
#pragma once

#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/train_run.h"

namespace megacpp::testing {

inline const std::string kGrpoArchitecture =
    " --model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48"
    " --tokenizer-type ByteLevelTokenizer --max-position-embeddings 16";
inline const std::string kGrpoModel = kGrpoArchitecture + " --seq-length 16 --seed 3";

// DIR/NAME with `count` JSON lines {"prompt": "a+b=", "answer": "a + b"}; returns the path.
inline std::string write_sum_prompts(const std::string& dir, const std::string& name, int count) {
  std::string lines;
  for (int i = 0; i < count; ++i) {
    lines += "{\"prompt\": \"" + std::to_string(i % 7) + "+" + std::to_string(i % 5) + "=\", \"answer\": \"" + std::to_string(i % 7 + i % 5) +
             "\"}\n";
  }
  return write_file(dir, name, lines);
}

// Numbers as tokens (NullTokenizer, 8 of them) and weights drawn wide: with one-token answers
// (write_number_sum_prompts, --response-length 1) some responses are rewarded from the first step.
inline const std::string kGrpoNumbersModel =
    " --model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48"
    " --tokenizer-type NullTokenizer --vocab-size 8 --max-position-embeddings 16 --seq-length 16 --seed 3 --init-method-std 0.5";

// DIR/NAME with `count` JSON lines {"prompt": "a b", "answer": "(a + b) mod 8"}; returns the path.
inline std::string write_number_sum_prompts(const std::string& dir, const std::string& name, int count) {
  std::string lines;
  for (int i = 0; i < count; ++i) {
    lines += "{\"prompt\": \"" + std::to_string(i % 7) + " " + std::to_string(i % 5) + "\", \"answer\": \"" +
             std::to_string((i % 7 + i % 5) % 8) + "\"}\n";
  }
  return write_file(dir, name, lines);
}

// megacpp-grpo on `ranks` local ranks with `model`'s flags and then `flags`.
inline CommandResult grpo(int ranks, const std::string& flags, const std::string& model = kGrpoModel) {
  return run_command(std::string(MEGACPP_RUN_BINARY) + " --nproc-per-node " + std::to_string(ranks) + " --master-port 0 " +
                     MEGACPP_GRPO_BINARY + model + " " + flags);
}

inline int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The step lines up to their learning rate (without the timings).
inline std::vector<std::string> grpo_step_lines(const std::string& output) {
  const std::regex line(R"(grpo step \d+/\d+ \| reward [^\n]*\| learning rate [0-9.E+-]+)");
  std::vector<std::string> lines;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) lines.push_back(it->str());
  return lines;
}

}  // namespace megacpp::testing
