// GPT-2's vocabulary files, read into the id-level tables the BPE loop works on.
//
// encoder.json maps each token, written in GPT-2's printable byte alphabet (bytes_to_unicode:
// 'Ġ' is the space byte, ...), to its id; vocab.bpe lists the merges, best first. Both are
// translated back to raw bytes once here, so encoding never builds unicode strings: a word
// starts as the ids of its single bytes and each merge turns a pair of ids into one id.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace megacpp::data {

struct Gpt2BpeMerge {
  int32_t rank;    // line order in vocab.bpe: lower merges first
  int32_t merged;  // id of the concatenated token
};

struct Gpt2BpeVocab {
  std::vector<std::string> token_bytes;                 // [vocab_size] raw bytes of each id
  std::array<int32_t, 256> byte_ids{};                  // id of each single-byte token
  std::unordered_map<uint64_t, Gpt2BpeMerge> merges;    // pair_key(left, right) -> merge
  int32_t eod = -1;                                     // id of "<|endoftext|>"

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
};

// Throws std::invalid_argument naming the flag and file: "--vocab-file 'x': cannot open",
// "--merge-file 'y': line 7: expected two symbols", ...
Gpt2BpeVocab load_gpt2_bpe_vocab(const std::string& vocab_file, const std::string& merge_file);

}  // namespace megacpp::data
