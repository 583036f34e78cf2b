// Per piece, start from the ids of its bytes and, as OpenAI's encoder.py bpe(), repeatedly take
// the adjacent pair with the lowest merge rank and merge every occurrence of it left to right,
// until no pair has a rank. Hugging Face's BPE (a queue of the lowest rank, leftmost first)
// gives the same tokens. Running this on ids rather than on the unicode alphabet gives the same
// tokens too (the alphabet is a bijection) without building strings.
#include "io/data/tokenizer/byte_level_bpe.h"

#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace megacpp::io::data {

// Piece -> ids, shared by every thread calling encode(): lookups take a shared lock, so workers
// only wait on each other when one inserts. Bounded: once full it keeps what it has (the most
// frequent words tend to come first) instead of growing with the corpus, and long pieces (runs
// of spaces, ASCII art) are not kept at all.
class ByteLevelBpe::Cache {
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

ByteLevelBpe::ByteLevelBpe(const ByteLevelBpeVocab& vocab, bool ignore_merges)
    : vocab_(vocab), ignore_merges_(ignore_merges), cache_(std::make_unique<Cache>()) {}

ByteLevelBpe::~ByteLevelBpe() = default;

void ByteLevelBpe::encode(std::string_view piece, std::vector<int64_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(vocab_.byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (cache_->find(piece, out)) return;
  std::vector<int32_t> word;  // [symbols] token ids, one per byte to start with
  auto whole = ignore_merges_ ? vocab_.ids.find(std::string(piece)) : vocab_.ids.end();
  if (whole != vocab_.ids.end()) {
    word.push_back(whole->second);
  } else {
    word.reserve(piece.size());
    for (char c : piece) word.push_back(vocab_.byte_ids[static_cast<unsigned char>(c)]);
    merge(word);
  }
  out.insert(out.end(), word.begin(), word.end());
  cache_->insert(piece, std::move(word));
}

// encoder.py's bpe() loop: lowest-ranked pair first, all its occurrences left to right.
void ByteLevelBpe::merge(std::vector<int32_t>& word) const {
  std::vector<int32_t> merged;
  while (word.size() > 1) {
    const ByteLevelBpeMerge* best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = vocab_.merges.find(ByteLevelBpeVocab::pair_key(word[i], word[i + 1]));
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

}  // namespace megacpp::io::data
