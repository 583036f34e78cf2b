// Note [Pre-tokenizer patterns]
// OpenAI's encoder.py (and Megatron's gpt2_tokenization.py, a copy of it) splits text with
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// in Python's `regex` module; Hugging Face's tokenizers run their `Split` patterns (Llama 3's,
// Qwen's) with Oniguruma. In both, \s is exactly Unicode's White_Space property. PCRE2's \s in
// UCP mode adds U+180E (and JavaScript's drops U+0085 and adds U+FEFF), so \s and \S are
// rewritten below as that White_Space class before compiling: the pieces are then the Python
// and Rust ones. \p{L} and \p{N} follow the Unicode tables of the linked PCRE2 (10.42: Unicode
// 14), which only matters for characters assigned since. (?i:...) folds case as Oniguruma does
// for these patterns' ASCII letters.
//
// Invalid UTF-8: the pattern is compiled with PCRE2_MATCH_INVALID_UTF, so matching never
// fails on bad bytes and never includes them in a match. A run of bytes no match covers
// becomes a piece of its own (as Hugging Face's "Isolated" keeps the text between matches),
// which BPE encodes from its single-byte tokens. tokenize() therefore takes any bytes, and
// detokenize() gives them back unchanged. (The references only see decoded strings, so there
// is nothing to follow for invalid bytes.)
#include "io/data/tokenizer/regex_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>
#include <string>

namespace megacpp::io::data {

const char kGpt2PretokenizerPattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Unicode's White_Space, as the inside of a character class.
constexpr char kWhiteSpace[] =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// `pattern` with \s and \S spelled as White_Space (Note [Pre-tokenizer patterns]). Inside a
// class, \s becomes the list; \S there (no pattern megacpp knows uses it) keeps PCRE2's meaning.
std::string with_white_space_spelled_out(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace) : std::string("[") + kWhiteSpace + "]";
      } else if (next == 'S' && !in_class) {
        out += std::string("[^") + kWhiteSpace + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a leading ']' is literal
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct RegexPretokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

RegexPretokenizer::RegexPretokenizer(const std::string& pattern) : regex_(std::make_unique<Regex>()) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string spelled = with_white_space_spelled_out(pattern);
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled.c_str()), spelled.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
  if (regex_->code == nullptr) {
    throw std::invalid_argument("pre-tokenizer pattern does not compile (at offset " + std::to_string(error_offset) +
                                " of " + spelled + "): " + pcre2_message(error));
  }
  // Without JIT support (some platforms) pcre2_match interprets: slower, same pieces.
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);
}

RegexPretokenizer::~RegexPretokenizer() = default;

std::vector<std::string_view> RegexPretokenizer::split(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(regex_->code, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::string_view> pieces;
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = pcre2_match(regex_->code, subject, text.size(), offset, 0, match.get(), nullptr);
    // The JIT's default 32 KiB stack can run out on a huge run of one class; the interpreter
    // uses the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(regex_->code, subject, text.size(), offset, PCRE2_NO_JIT, match.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      pieces.push_back(text.substr(offset));  // only invalid bytes are left
      break;
    }
    if (rc < 0) throw std::runtime_error("pre-tokenizer: PCRE2 match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    if (range[1] <= range[0] || range[0] < offset) {
      throw std::logic_error("pre-tokenizer: empty or backward match at byte " + std::to_string(range[0]));
    }
    if (range[0] > offset) pieces.push_back(text.substr(offset, range[0] - offset));  // invalid bytes
    pieces.push_back(text.substr(range[0], range[1] - range[0]));
    offset = range[1];
  }
  return pieces;
}

}  // namespace megacpp::io::data
