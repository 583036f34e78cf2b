// HuggingFaceTokenizer: a tokenizer.json (byte-level BPE) run as Hugging Face's `tokenizers`
// encodes one text with its special tokens (what Megatron's HuggingFaceTokenizer.tokenize and
// MindSpeed's PretrainedFromHF return):
//   1. added tokens in the raw text are cut out as their ids (leftmost, longest first);
//   2. the rest is normalized (NFC, where the file says so) and cut at the added tokens that
//      match normalized text;
//   3. each remaining segment gets ByteLevel's prefix space (add_prefix_space), is split by the
//      pre-tokenizer's pattern, and each piece goes through BPE;
//   4. the post-processor's special tokens (Llama 3's <|begin_of_text|>) go around it all.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "io/data/tokenizer/builtin_tokenizers.h"
#include "io/data/tokenizer/byte_level_bpe.h"
#include "io/data/tokenizer/hf_tokenizer_json.h"
#include "io/data/tokenizer/regex_pretokenizer.h"
#include "io/data/tokenizer/unicode_nfc.h"

namespace megacpp::io::data {
namespace {

// Added tokens, found in a text leftmost first and, among those starting at one byte, longest
// first (Hugging Face's leftmost-longest matching).
class AddedTokenMatcher {
 public:
  void add(const std::string& content, int32_t id) { by_first_byte_[static_cast<unsigned char>(content[0])].emplace_back(content, id); }
  void sort() {
    for (auto& [byte, tokens] : by_first_byte_) {
      std::sort(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    }
  }
  // Calls on_text(segment) and on_token(id) in order for `text`.
  template <typename OnText, typename OnToken>
  void split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    size_t start = 0;
    for (size_t i = 0; i < text.size() && !by_first_byte_.empty(); ++i) {
      auto it = by_first_byte_.find(static_cast<unsigned char>(text[i]));
      if (it == by_first_byte_.end()) continue;
      for (const auto& [content, id] : it->second) {
        if (text.compare(i, content.size(), content) != 0) continue;
        if (i > start) on_text(text.substr(start, i - start));
        on_token(id);
        start = i + content.size();
        i = start - 1;
        break;
      }
    }
    if (start < text.size()) on_text(text.substr(start));
  }

 private:
  std::map<unsigned char, std::vector<std::pair<std::string, int32_t>>> by_first_byte_;
};

class HuggingFaceTokenizer final : public Tokenizer {
 public:
  explicit HuggingFaceTokenizer(HfTokenizerSpec spec)
      : spec_(std::move(spec)), bpe_(spec_.vocab, spec_.ignore_merges) {
    if (!spec_.split_pattern.empty()) {
      try {
        pretokenizer_ = std::make_unique<RegexPretokenizer>(spec_.split_pattern);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(spec_.path + ": " + e.what());
      }
    }
    for (const auto& token : spec_.added_tokens) (token.normalized ? normalized_ : raw_).add(token.content, token.id);
    raw_.sort();
    normalized_.sort();
  }

  std::vector<int64_t> tokenize(std::string_view text) const override {
    std::vector<int64_t> ids = spec_.prefix_ids;
    ids.reserve(text.size() / 3 + spec_.prefix_ids.size() + spec_.suffix_ids.size());
    encode(text, ids);
    ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
    return ids;
  }

  std::vector<int64_t> tokenize_without_added_specials(std::string_view text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3);
    encode(text, ids);
    return ids;
  }

  // Steps 1-3 of the file's comment, appended to `ids`.
  void encode(std::string_view text, std::vector<int64_t>& ids) const {
    auto push_id = [&](int32_t id) { ids.push_back(id); };
    raw_.split(
        text,
        [&](std::string_view segment) {
          const std::string normalized = spec_.nfc ? to_nfc(segment) : std::string(segment);
          normalized_.split(normalized, [&](std::string_view part) { encode_segment(part, ids); }, push_id);
        },
        push_id);
  }

  std::string detokenize(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size() || (spec_.vocab.token_bytes[id].empty())) {
        throw std::out_of_range("HuggingFaceTokenizer: unknown token id " + std::to_string(id) + " (vocab size " +
                                std::to_string(vocab_size()) + ")");
      }
      text += spec_.vocab.token_bytes[id];
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(spec_.vocab.token_bytes.size()); }
  int64_t eod() const override { return spec_.vocab.eod; }
  std::string name() const override { return "HuggingFaceTokenizer"; }

 private:
  void encode_segment(std::string_view segment, std::vector<int64_t>& ids) const {
    std::string prefixed;
    if (spec_.add_prefix_space && segment.substr(0, 1) != " ") {
      prefixed = " " + std::string(segment);
      segment = prefixed;
    }
    if (!pretokenizer_) return bpe_.encode(segment, ids);
    for (std::string_view piece : pretokenizer_->split(segment)) bpe_.encode(piece, ids);
  }

  HfTokenizerSpec spec_;
  ByteLevelBpe bpe_;  // refers to spec_.vocab
  std::unique_ptr<RegexPretokenizer> pretokenizer_;
  AddedTokenMatcher raw_, normalized_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path, const std::string& flag) {
  return std::make_unique<HuggingFaceTokenizer>(load_hf_tokenizer(path, flag));
}

}  // namespace megacpp::io::data
