// SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer: models trained here by
// Debian's spm_train on the fortunes (a unigram model, and a byte-fallback BPE as Llama 2's),
// checked against Debian's spm_encode line by line; Llama2Tokenizer's BOS; errors by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>

#include "io/data/tokenizer/tokenizer.h"
#include "tests/io/fortunes.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io::data {
namespace {

using Ids = std::vector<int64_t>;
using io_test::error_of;
using io_test::read_bytes;
using io_test::run_command;
using io_test::TempDir;
using io_test::write_bytes;

std::unique_ptr<Tokenizer> sentencepiece(const std::string& type, const std::string& model) {
  TokenizerOptions options;
  options.type = type;
  options.tokenizer_model = model;
  return build_tokenizer(options);
}

// One fortune line per corpus line (SentencePiece encodes a line as one sentence).
std::string fortune_lines() {
  std::vector<std::string> documents;
  io_test::fortune_documents(&documents);
  std::string lines;
  for (const auto& document : documents) {
    std::istringstream in(document);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line != "%") lines += line + "\n";
    }
  }
  return lines;
}

class SentencePieceModels : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    write_bytes(*dir_ / "corpus.txt", fortune_lines());
    for (const std::string& kind : {"unigram", "bpe"}) {
      const std::string command = "spm_train --minloglevel=2 --input='" + (*dir_ / "corpus.txt") + "' --model_prefix='" +
                                  (*dir_ / kind) + "' --vocab_size=2000 --model_type=" + kind +
                                  (kind == "bpe" ? " --byte_fallback=true" : "") + " 2>&1";
      const auto trained = run_command(command);
      ASSERT_EQ(trained.status, 0) << command << " (apt-get install sentencepiece; scripts/setup.sh does it):\n" << trained.output;
    }
  }
  static void TearDownTestSuite() { dir_.reset(); }
  std::string model() const { return *dir_ / (std::string(GetParam()) + ".model"); }
  static std::unique_ptr<TempDir> dir_;
};
std::unique_ptr<TempDir> SentencePieceModels::dir_;

TEST_P(SentencePieceModels, MatchesSpmEncodeOnFortunes) {
  const std::string corpus = *dir_ / "corpus.txt", ids_file = *dir_ / (std::string(GetParam()) + ".ids");
  const auto encoded = run_command("spm_encode --model='" + model() + "' --output_format=id < '" + corpus + "' > '" + ids_file + "'");
  ASSERT_EQ(encoded.status, 0) << encoded.output;
  const auto tokenizer = sentencepiece("SentencePieceTokenizer", model());
  std::istringstream lines(read_bytes(corpus)), expected_lines(read_bytes(ids_file));
  int64_t count = 0, mismatches = 0;
  for (std::string line, expected; std::getline(lines, line) && std::getline(expected_lines, expected); ++count) {
    Ids want;
    std::istringstream ids(expected);
    for (int64_t id; ids >> id;) want.push_back(id);
    if (tokenizer->tokenize(line) != want && ++mismatches <= 5) ADD_FAILURE() << "line " << count << ": " << line;
  }
  EXPECT_GT(count, 50000);
  EXPECT_EQ(mismatches, 0) << "of " << count << " lines";
}

TEST_P(SentencePieceModels, TypesVocabularyEodAndRoundTrip) {
  const auto plain = sentencepiece("SentencePieceTokenizer", model());
  const auto gpt = sentencepiece("GPTSentencePieceTokenizer", model());
  const auto llama2 = sentencepiece("Llama2Tokenizer", model());
  EXPECT_EQ(plain->vocab_size(), 2000);
  EXPECT_EQ(plain->eod(), 2);  // spm_train's defaults: <unk> 0, <s> 1, </s> 2
  EXPECT_EQ(llama2->name(), "Llama2Tokenizer");
  // Characters the unigram model never saw are its unknown piece; byte fallback (Llama 2's) keeps them.
  const bool byte_fallback = std::string(GetParam()) == "bpe";
  const std::string text = std::string("The quick brown fox jumps over the lazy dog; 42.") +
                           (byte_fallback ? " caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" : "");
  const Ids ids = plain->tokenize(text);
  EXPECT_EQ(gpt->tokenize(text), ids);
  Ids with_bos = {1};
  with_bos.insert(with_bos.end(), ids.begin(), ids.end());
  EXPECT_EQ(llama2->tokenize(text), with_bos);  // Megatron's _Llama2Tokenizer: BOS first
  EXPECT_EQ(plain->detokenize(ids), text);
  EXPECT_NE(error_of<std::out_of_range>([&] { plain->detokenize({2000}); }).find("2000"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(SpmTrain, SentencePieceModels, ::testing::Values("unigram", "bpe"),
                         [](const auto& info) { return std::string(info.param); });

TEST(SentencePieceTokenizer, ErrorsNameTheFlagAndFile) {
  TempDir dir;
  write_bytes(dir / "not.model", "plain text");
  EXPECT_NE(error_of<std::invalid_argument>([&] { sentencepiece("SentencePieceTokenizer", dir / "not.model"); })
                .find("--tokenizer-model '" + (dir / "not.model") + "': not a SentencePiece model"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>([&] { sentencepiece("Llama2Tokenizer", ""); }).find("needs --tokenizer-model"),
            std::string::npos);
  write_bytes(dir / "corpus.txt", fortune_lines().substr(0, 200000));
  const auto trained = run_command("spm_train --minloglevel=2 --input='" + (dir / "corpus.txt") + "' --model_prefix='" +
                                   (dir / "noeos") + "' --vocab_size=300 --eos_id=-1 --bos_id=-1 2>&1");
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(error_of<std::invalid_argument>([&] { sentencepiece("SentencePieceTokenizer", dir / "noeos.model"); })
                .find("no end-of-sentence piece"),
            std::string::npos);
}

}  // namespace
}  // namespace megacpp::io::data
