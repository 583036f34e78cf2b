// NullTokenizer, as Megatron's _NullTokenizer: the text already is the ids, written as decimal
// integers separated by whitespace. Ids are 0..N-1, eod = N, vocab_size = N + 1.
#include <cctype>
#include <charconv>
#include <stdexcept>

#include "io/data/tokenizer/builtin_tokenizers.h"

namespace megacpp::io::data {
namespace {

class NullTokenizer final : public Tokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size) : size_without_eod_(vocab_size) {}

  // Throws std::invalid_argument naming a token that is not an integer in [0, N).
  std::vector<int64_t> tokenize(std::string_view text) const override {
    std::vector<int64_t> ids;
    size_t i = 0;
    while (true) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i == text.size()) return ids;
      size_t end = i;
      while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
      const std::string_view token = text.substr(i, end - i);
      int64_t id = 0;
      auto [stop, error] = std::from_chars(token.data(), token.data() + token.size(), id);
      if (error != std::errc() || stop != token.data() + token.size()) {
        throw std::invalid_argument("NullTokenizer: token '" + std::string(token) + "' is not an integer id");
      }
      if (id < 0 || id >= size_without_eod_) {
        throw std::invalid_argument("NullTokenizer: id " + std::to_string(id) + " is outside [0, " +
                                    std::to_string(size_without_eod_) + ") (--vocab-size " +
                                    std::to_string(size_without_eod_) + ")");
      }
      ids.push_back(id);
      i = end;
    }
  }

  // Ids joined by single spaces; eod is written as its number, as Megatron does.
  std::string detokenize(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (int64_t id : ids) {
      if (id < 0 || id > size_without_eod_) {
        throw std::out_of_range("NullTokenizer: unknown token id " + std::to_string(id) + " (vocab size " +
                                std::to_string(vocab_size()) + ")");
      }
      if (!text.empty()) text.push_back(' ');
      text += std::to_string(id);
    }
    return text;
  }

  int64_t vocab_size() const override { return size_without_eod_ + 1; }
  int64_t eod() const override { return size_without_eod_; }
  std::string name() const override { return "NullTokenizer"; }

 private:
  int64_t size_without_eod_;  // N, the --vocab-size
};

}  // namespace

std::unique_ptr<Tokenizer> make_null_tokenizer(int64_t vocab_size) { return std::make_unique<NullTokenizer>(vocab_size); }

}  // namespace megacpp::io::data
