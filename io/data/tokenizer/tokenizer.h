// Tokenizers, as Megatron names them: GPT2BPETokenizer (OpenAI's GPT-2 byte-level BPE from
// encoder.json + vocab.bpe), HuggingFaceTokenizer (a byte-level BPE tokenizer.json: Llama 3,
// Qwen2/3, GPT-2; MindSpeed's PretrainedFromHF is the same), ByteLevelTokenizer (the 256 byte
// values, no files needed) and NullTokenizer (pre-tokenized text: space-separated ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megacpp::io::data {

// tokenize and detokenize are const and safe to call from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any bytes, valid UTF-8 or not (NullTokenizer: std::invalid_argument naming a bad token).
  // Callers append eod() themselves. HuggingFaceTokenizer, as Megatron's, also gives the ids of
  // special tokens written in the text and the ones its post-processor adds (a BOS).
  virtual std::vector<int64_t> tokenize(std::string_view text) const = 0;
  // tokenize without the special tokens a post-processor adds around the text (transformers'
  // add_special_tokens=False, how apply_chat_template tokenizes a rendered conversation, whose
  // template writes them itself).
  virtual std::vector<int64_t> tokenize_without_added_specials(std::string_view text) const { return tokenize(text); }
  // Inverse of tokenize: detokenize(tokenize(t)) == t byte for byte (NullTokenizer: up to
  // whitespace; HuggingFaceTokenizer: with the added special tokens' text). An id outside [0, vocab_size()) throws std::out_of_range naming it.
  virtual std::string detokenize(const std::vector<int64_t>& ids) const = 0;
  // Number of ids the tokenizer can produce, the end-of-document id included.
  virtual int64_t vocab_size() const = 0;
  virtual int64_t eod() const = 0;
  virtual std::string name() const = 0;
};

struct TokenizerOptions {
  // GPT2BPETokenizer | HuggingFaceTokenizer (or PretrainedFromHF) | ByteLevelTokenizer | NullTokenizer
  std::string type = "ByteLevelTokenizer";
  std::string vocab_file;                   // GPT2BPETokenizer: encoder.json
  std::string merge_file;                   // GPT2BPETokenizer: vocab.bpe
  std::string tokenizer_model;              // HuggingFaceTokenizer: a folder with tokenizer.json
  std::string tokenizer_model_flag = "--tokenizer-model";  // or MindSpeed's --tokenizer-name-or-path, for errors
  int64_t vocab_size = 0;                   // NullTokenizer: ids are 0..vocab_size-1, eod = vocab_size; else 0 or a check
};

// Throws std::invalid_argument naming the flag (--tokenizer-type, --vocab-file, --merge-file,
// --tokenizer-model, --vocab-size) or the file at fault, for a file flag the tokenizer type
// does not read, and for a --vocab-size that is not another tokenizer's vocabulary.
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options);

// Sets options.tokenizer_model from Megatron's --tokenizer-model or MindSpeed's
// --tokenizer-name-or-path (either may be empty; both given and different is an error).
void set_tokenizer_model(TokenizerOptions& options, const std::string& tokenizer_model,
                         const std::string& tokenizer_name_or_path);

// Megatron's padded vocabulary: vocab_size rounded up to a multiple of `divisible_by`.
int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by);

}  // namespace megacpp::io::data
