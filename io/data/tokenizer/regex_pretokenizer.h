// A pre-tokenizer: the regular expression that cuts text into the pieces BPE runs on (GPT-2's,
// or the `Split` pattern of a Hugging Face tokenizer.json).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megacpp::io::data {

// OpenAI's encoder.py pattern, which Hugging Face's ByteLevel pre-tokenizer (use_regex) uses too.
extern const char kGpt2PretokenizerPattern[];

// Compiled once (JIT where PCRE2 has it); split() is const and safe from several threads.
class RegexPretokenizer {
 public:
  // `pattern` in the syntax of Python's `regex` / Oniguruma (Note [Pre-tokenizer patterns]).
  // Throws std::invalid_argument with PCRE2's message if it does not compile.
  explicit RegexPretokenizer(const std::string& pattern);
  ~RegexPretokenizer();
  RegexPretokenizer(const RegexPretokenizer&) = delete;
  RegexPretokenizer& operator=(const RegexPretokenizer&) = delete;

  // The matches of the pattern and the text between them, in order ("Isolated"); they
  // concatenate to `text` exactly, whatever its bytes.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  std::unique_ptr<Regex> regex_;
};

}  // namespace megacpp::io::data
