// GPT-2's pre-tokenizer: the regular expression that cuts text into the pieces BPE runs on.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

namespace megacpp::data {

// Compiled once (JIT where PCRE2 has it); split() is const and safe from several threads.
class Gpt2Pretokenizer {
 public:
  Gpt2Pretokenizer();
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // The pieces of `text`, in order; they concatenate to `text` exactly, whatever its bytes.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  std::unique_ptr<Regex> regex_;
};

}  // namespace megacpp::data
