// ByteLevelTokenizer: one token per byte (ids 0..255), eod = 256. Needs no files, so it is the
// default and what tests and quick experiments use.
#include <stdexcept>

#include "io/data/tokenizer/builtin_tokenizers.h"

namespace megacpp::io::data {
namespace {

class ByteLevelTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> tokenize(std::string_view text) const override {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }

  // eod has no bytes: it decodes to nothing.
  std::string detokenize(const std::vector<int64_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int64_t id : ids) {
      if (id == kEod) continue;
      if (id < 0 || id > 255) {
        throw std::out_of_range("ByteLevelTokenizer: unknown token id " + std::to_string(id) + " (vocab size 257)");
      }
      text.push_back(static_cast<char>(id));
    }
    return text;
  }

  int64_t vocab_size() const override { return kEod + 1; }
  int64_t eod() const override { return kEod; }
  std::string name() const override { return "ByteLevelTokenizer"; }

 private:
  static constexpr int64_t kEod = 256;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_level_tokenizer() { return std::make_unique<ByteLevelTokenizer>(); }

}  // namespace megacpp::io::data
