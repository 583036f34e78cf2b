// The BPE step of a byte-level tokenizer: one pre-tokenized piece -> ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "io/data/tokenizer/byte_level_bpe_vocab.h"

namespace megacpp::io::data {

// encode() is const and safe from several threads (its cache takes a lock).
class ByteLevelBpe {
 public:
  // ignore_merges: a piece that is a token of the vocabulary as a whole is that token, merges
  // or not (Hugging Face's BPE option, on in Llama 3's tokenizer.json).
  ByteLevelBpe(const ByteLevelBpeVocab& vocab, bool ignore_merges);
  ~ByteLevelBpe();

  // Appends the ids of `piece` to `out`.
  void encode(std::string_view piece, std::vector<int64_t>& out) const;

 private:
  void merge(std::vector<int32_t>& word) const;

  class Cache;
  const ByteLevelBpeVocab& vocab_;
  const bool ignore_merges_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace megacpp::io::data
