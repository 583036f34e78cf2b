// GPT2BPETokenizer: OpenAI's GPT-2 byte-level BPE (encoder.py), on raw bytes and ids.
//
// tokenize: pre-tokenize (Note [GPT-2 pre-tokenizer]), then per piece start from the ids of its
// bytes and, as encoder.py's bpe(), repeatedly take the adjacent pair with the lowest merge
// rank and merge every occurrence of it left to right, until no pair has a rank. Running this
// on ids rather than on the unicode alphabet gives the same tokens (the alphabet is a
// bijection) without building strings.
#include <climits>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "megacpp/data/tokenizer/builtin_tokenizers.h"
#include "megacpp/data/tokenizer/gpt2_bpe_vocab.h"
#include "megacpp/data/tokenizer/gpt2_pretokenizer.h"

namespace megacpp::data {
namespace {

// Piece -> ids, shared by every thread calling tokenize(): lookups take a shared lock, so
// workers only wait on each other when one inserts. Bounded: once full it keeps what it has
// (the most frequent words tend to come first) instead of growing with the corpus, and long
// pieces (runs of spaces, ASCII art) are not kept at all.
class BpeCache {
 public:
  bool find(std::string_view piece, std::vector<int64_t>& out) const {
    if (piece.size() > kMaxPieceBytes) return false;
    std::shared_lock lock(mutex_);
    auto it = map_.find(std::string(piece));
    if (it == map_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void insert(std::string_view piece, std::vector<int32_t> ids) {
    std::unique_lock lock(mutex_);
    if (piece.size() <= kMaxPieceBytes && map_.size() < kMaxEntries) map_.emplace(std::string(piece), std::move(ids));
  }

 private:
  static constexpr size_t kMaxEntries = size_t{1} << 18;
  static constexpr size_t kMaxPieceBytes = 128;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::vector<int32_t>> map_;
};

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  explicit Gpt2BpeTokenizer(Gpt2BpeVocab vocab) : vocab_(std::move(vocab)) {}

  std::vector<int64_t> tokenize(std::string_view text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3);
    for (std::string_view piece : pretokenizer_.split(text)) encode_piece(piece, ids);
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
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
    if (piece.size() == 1) {
      out.push_back(vocab_.byte_ids[static_cast<unsigned char>(piece[0])]);
      return;
    }
    if (cache_.find(piece, out)) return;
    std::vector<int32_t> word;  // [symbols] token ids, one per byte to start with
    word.reserve(piece.size());
    for (char c : piece) word.push_back(vocab_.byte_ids[static_cast<unsigned char>(c)]);
    merge(word);
    out.insert(out.end(), word.begin(), word.end());
    cache_.insert(piece, std::move(word));
  }

  // encoder.py's bpe() loop: lowest-ranked pair first, all its occurrences left to right.
  void merge(std::vector<int32_t>& word) const {
    std::vector<int32_t> merged;
    while (word.size() > 1) {
      const Gpt2BpeMerge* best = nullptr;
      int32_t left = 0, right = 0;
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        auto it = vocab_.merges.find(Gpt2BpeVocab::pair_key(word[i], word[i + 1]));
        if (it != vocab_.merges.end() && (best == nullptr || it->second.rank < best->rank)) {
          best = &it->second;
          left = word[i];
          right = word[i + 1];
        }
      }
      if (best == nullptr) return;
      merged.clear();
      for (size_t i = 0; i < word.size();) {
        if (word[i] == left && i + 1 < word.size() && word[i + 1] == right) {
          merged.push_back(best->merged);
          i += 2;
        } else {
          merged.push_back(word[i++]);
        }
      }
      word.swap(merged);
    }
  }

  Gpt2BpeVocab vocab_;
  Gpt2Pretokenizer pretokenizer_;
  mutable BpeCache cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_file, const std::string& merge_file) {
  return std::make_unique<Gpt2BpeTokenizer>(load_gpt2_bpe_vocab(vocab_file, merge_file));
}

}  // namespace megacpp::data
