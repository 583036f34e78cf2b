// build_tokenizer: TokenizerOptions (the --tokenizer-type family of flags) -> a Tokenizer,
// with each missing or wrong flag reported by name.
#include <stdexcept>

#include "megacpp/data/tokenizer/builtin_tokenizers.h"

namespace megacpp::data {

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  if (options.type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) {
      throw std::invalid_argument("--tokenizer-type GPT2BPETokenizer needs --vocab-file (GPT-2's encoder.json)");
    }
    if (options.merge_file.empty()) {
      throw std::invalid_argument("--tokenizer-type GPT2BPETokenizer needs --merge-file (GPT-2's vocab.bpe)");
    }
    return make_gpt2_bpe_tokenizer(options.vocab_file, options.merge_file);
  }
  if (options.type == "ByteLevelTokenizer") return make_byte_level_tokenizer();
  if (options.type == "NullTokenizer") {
    if (options.vocab_size <= 0) {
      throw std::invalid_argument("--tokenizer-type NullTokenizer needs --vocab-size > 0 (got " +
                                  std::to_string(options.vocab_size) + ")");
    }
    return make_null_tokenizer(options.vocab_size);
  }
  throw std::invalid_argument("--tokenizer-type '" + options.type +
                              "': unknown tokenizer (known: GPT2BPETokenizer, ByteLevelTokenizer, NullTokenizer)");
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by) {
  if (divisible_by <= 1) return vocab_size;
  return (vocab_size + divisible_by - 1) / divisible_by * divisible_by;
}

}  // namespace megacpp::data
