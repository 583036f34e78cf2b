// The id-level tables of a byte-level BPE (GPT-2's, and Hugging Face's tokenizer.json models
// with a ByteLevel pre-tokenizer: Llama 3, Qwen2/3, ...).
//
// Vocabulary files write each token in GPT-2's printable byte alphabet (bytes_to_unicode: 'Ġ'
// is the space byte, ...) and list the merges, best first. Both are translated back to raw bytes
// once, when the files are read, so encoding never builds unicode strings: a word starts as the
// ids of its single bytes and each merge turns a pair of ids into one id.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace megacpp::io::data {

struct ByteLevelBpeMerge {
  int32_t rank;    // order in the merge list: lower merges first
  int32_t merged;  // id of the concatenated token
};

struct ByteLevelBpeVocab {
  std::vector<std::string> token_bytes;                     // [vocab_size] raw bytes of each id
  std::unordered_map<std::string, int32_t> ids;             // raw bytes -> id, for the BPE model's tokens
  std::array<int32_t, 256> byte_ids{};                      // id of each single-byte token
  std::unordered_map<uint64_t, ByteLevelBpeMerge> merges;   // pair_key(left, right) -> merge
  int32_t eod = -1;
  int32_t merges_added = 0;  // the next merge's rank

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  // Adds the merge of two tokens written in the byte alphabet, ranked after the ones before (a
  // later duplicate wins, as in encoder.py and Hugging Face). Returns "" or what is wrong.
  std::string add_merge(const std::string& left, const std::string& right);
  // Fills byte_ids. Returns "" or the first byte without a token.
  std::string find_byte_ids();
};

// Raw bytes of a token written in GPT-2's byte alphabet; nullopt if `text` is not UTF-8 or holds
// a character outside the alphabet.
std::optional<std::string> byte_level_alphabet_to_bytes(std::string_view text);

// GPT-2's encoder.json and vocab.bpe. Throws std::invalid_argument naming the flag and file:
// "--vocab-file 'x': cannot open", "--merge-file 'y': line 7: expected two symbols", ...
ByteLevelBpeVocab load_gpt2_bpe_vocab(const std::string& vocab_file, const std::string& merge_file);

}  // namespace megacpp::io::data
