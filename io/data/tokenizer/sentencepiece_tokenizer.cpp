// SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer: a SentencePiece
// tokenizer.model through Debian's libsentencepiece, as Megatron's tokenizers use it:
//   - tokenize is SentencePiece's Encode (encode_as_ids); Llama2Tokenizer puts the model's BOS
//     in front, as Megatron's _Llama2Tokenizer.tokenize does by default;
//   - the vocabulary is the model's pieces, and the end of document its EOS (Megatron Core's
//     SentencePiece tokenizer; the legacy _SentencePieceTokenizer appended <CLS>, <SEP>, <EOD>
//     and <MASK> for BERT and T5, which a GPT model does not use).
// SentencePiece reads UTF-8: invalid bytes become its unknown piece, so only valid text round
// trips byte for byte. The library is reached through its own scope (Note [SentencePiece in its
// own scope] in sentencepiece_library.h).
#include <stdexcept>

#include "io/data/tokenizer/builtin_tokenizers.h"
#include "io/data/tokenizer/sentencepiece_library.h"

namespace megacpp::io::data {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& type, const std::string& path, const std::string& flag)
      : library_(SentencePieceLibrary::get()), type_(type) {
    const std::string where = flag + " '" + path + "': ";
    const char* error = nullptr;
    model_ = library_.load(path.c_str(), &error);
    if (model_ == nullptr) throw std::invalid_argument(where + "not a SentencePiece model (" + error + ")");
    if (library_.eos_id(model_) < 0) {
      throw std::invalid_argument(where + "the model has no end-of-sentence piece for the end of document (spm_train --eos_id)");
    }
    if (type == "Llama2Tokenizer" && library_.bos_id(model_) < 0) {
      throw std::invalid_argument(where + "Llama2Tokenizer starts each text with BOS, and the model has none (spm_train --bos_id)");
    }
  }
  ~SentencePieceTokenizer() override { library_.free(model_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<int64_t> tokenize(std::string_view text) const override {
    int64_t count = 0;
    const char* error = nullptr;
    const int32_t* ids = library_.encode(model_, text.data(), text.size(), &count, &error);
    if (ids == nullptr) throw std::runtime_error(type_ + ": SentencePiece failed to encode: " + error);
    std::vector<int64_t> out;
    out.reserve(static_cast<size_t>(count) + 1);
    if (type_ == "Llama2Tokenizer") out.push_back(library_.bos_id(model_));
    out.insert(out.end(), ids, ids + count);
    return out;
  }

  std::string detokenize(const std::vector<int64_t>& ids) const override {
    std::vector<int32_t> pieces;
    pieces.reserve(ids.size());
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size()) {
        throw std::out_of_range(type_ + ": unknown token id " + std::to_string(id) + " (vocab size " +
                                std::to_string(vocab_size()) + ")");
      }
      pieces.push_back(static_cast<int32_t>(id));
    }
    size_t size = 0;
    const char* error = nullptr;
    const char* text = library_.decode(model_, pieces.data(), static_cast<int64_t>(pieces.size()), &size, &error);
    if (text == nullptr) throw std::runtime_error(type_ + ": SentencePiece failed to decode: " + error);
    return std::string(text, size);
  }

  int64_t vocab_size() const override { return library_.piece_size(model_); }
  int64_t eod() const override { return library_.eos_id(model_); }
  std::string name() const override { return type_; }

 private:
  const SentencePieceLibrary& library_;
  std::string type_;
  void* model_ = nullptr;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& type, const std::string& path,
                                                        const std::string& flag) {
  return std::make_unique<SentencePieceTokenizer>(type, path, flag);
}

}  // namespace megacpp::io::data
