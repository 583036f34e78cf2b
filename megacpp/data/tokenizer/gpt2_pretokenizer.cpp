// Note [GPT-2 pre-tokenizer]
// OpenAI's encoder.py (and Megatron's gpt2_tokenization.py, a copy of it) splits text with
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// in Python's `regex` module, whose \s is exactly Unicode's White_Space property. PCRE2's \s in
// UCP mode adds U+180E and JavaScript's (the npm gpt-3-encoder port) drops U+0085 and adds
// U+FEFF, so \s and \S are spelled out below as that White_Space class: the pieces are then
// the Python ones. \p{L} and \p{N} follow the Unicode tables of the linked PCRE2 (10.42:
// Unicode 14), which only matters for characters assigned since.
//
// Invalid UTF-8: the pattern is compiled with PCRE2_MATCH_INVALID_UTF, so matching never
// fails on bad bytes and never includes them in a match. Every valid character is matched by
// some alternative, so what lies between two matches is a run of invalid bytes: it becomes a
// piece of its own, which BPE encodes from its single-byte tokens. tokenize() therefore takes
// any bytes, and detokenize() gives them back unchanged. (OpenAI's encoder only sees decoded
// str, so there is no reference to follow here.)
#include "megacpp/data/tokenizer/gpt2_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>
#include <string>

namespace megacpp::data {
namespace {

#define MEGACPP_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" MEGACPP_WS "\\p{L}\\p{N}]+"
    "|[" MEGACPP_WS "]+(?![^" MEGACPP_WS "])|[" MEGACPP_WS "]+";
#undef MEGACPP_WS

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Gpt2Pretokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

Gpt2Pretokenizer::Gpt2Pretokenizer() : regex_(std::make_unique<Regex>()) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
  if (regex_->code == nullptr) {
    throw std::logic_error("GPT-2 pre-tokenizer pattern does not compile at offset " + std::to_string(error_offset) +
                           ": " + pcre2_message(error));
  }
  // Without JIT support (some platforms) pcre2_match interprets: slower, same pieces.
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);
}

Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

std::vector<std::string_view> Gpt2Pretokenizer::split(std::string_view text) const {
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
    if (rc < 0) throw std::runtime_error("GPT-2 pre-tokenizer: PCRE2 match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    if (range[1] <= range[0] || range[0] < offset) {
      throw std::logic_error("GPT-2 pre-tokenizer: empty or backward match at byte " + std::to_string(range[0]));
    }
    if (range[0] > offset) pieces.push_back(text.substr(offset, range[0] - offset));  // invalid bytes
    pieces.push_back(text.substr(range[0], range[1] - range[0]));
    offset = range[1];
  }
  return pieces;
}

}  // namespace megacpp::data
