// GPT2BPETokenizer: OpenAI's GPT-2 byte-level BPE (encoder.py), on raw bytes and ids:
// pre-tokenize with GPT-2's pattern (Note [Pre-tokenizer patterns]), then BPE each piece.
#include <stdexcept>
#include <string>
#include <utility>

#include "io/data/tokenizer/builtin_tokenizers.h"
#include "io/data/tokenizer/byte_level_bpe.h"
#include "io/data/tokenizer/regex_pretokenizer.h"

namespace megacpp::io::data {
namespace {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  explicit Gpt2BpeTokenizer(ByteLevelBpeVocab vocab)
      : vocab_(std::move(vocab)), pretokenizer_(kGpt2PretokenizerPattern), bpe_(vocab_, /*ignore_merges=*/false) {}

  std::vector<int64_t> tokenize(std::string_view text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3);
    for (std::string_view piece : pretokenizer_.split(text)) bpe_.encode(piece, ids);
    return ids;
  }

  std::string detokenize(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size()) {
        throw std::out_of_range("GPT2BPETokenizer: unknown token id " + std::to_string(id) + " (vocab size " +
                                std::to_string(vocab_size()) + ")");
      }
      text += vocab_.token_bytes[id];
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.token_bytes.size()); }
  int64_t eod() const override { return vocab_.eod; }
  std::string name() const override { return "GPT2BPETokenizer"; }

 private:
  ByteLevelBpeVocab vocab_;
  RegexPretokenizer pretokenizer_;
  ByteLevelBpe bpe_;  // refers to vocab_
};

}  // namespace

std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_file, const std::string& merge_file) {
  return std::make_unique<Gpt2BpeTokenizer>(load_gpt2_bpe_vocab(vocab_file, merge_file));
}

}  // namespace megacpp::io::data
