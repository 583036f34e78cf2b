// GPT-2's byte alphabet and the checks shared by every byte-level BPE vocabulary reader.
#include "io/data/tokenizer/byte_level_bpe_vocab.h"

namespace megacpp::io::data {
namespace {

// GPT-2's bytes_to_unicode, inverted: code point of the printable stand-in -> byte. Printable
// bytes stand for themselves; the other 68 (controls, space, 0x7F-0xA0, 0xAD) become
// U+0100.. in byte order, so every byte has a visible character and 0x143 is the largest.
std::array<int16_t, 0x144> unicode_to_byte_table() {
  std::array<int16_t, 0x144> table;
  table.fill(-1);
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[printable ? b : next++] = static_cast<int16_t>(b);
  }
  return table;
}

}  // namespace

std::optional<std::string> byte_level_alphabet_to_bytes(std::string_view text) {
  static const auto table = unicode_to_byte_table();
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if (c >= 0xC2 && c <= 0xDF && i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);  // not overlong: c >= 0xC2
      i += 2;
    } else {
      return std::nullopt;  // three- and four-byte sequences are all above U+0143
    }
    if (cp >= table.size() || table[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(table[cp]));
  }
  return bytes;
}

std::string ByteLevelBpeVocab::add_merge(const std::string& left, const std::string& right) {
  std::string merged;
  int32_t pair[2];
  const std::string* symbols[2] = {&left, &right};
  for (int k = 0; k < 2; ++k) {
    const auto bytes = byte_level_alphabet_to_bytes(*symbols[k]);
    if (!bytes) return "\"" + *symbols[k] + "\" has a character outside GPT-2's byte alphabet";
    auto it = ids.find(*bytes);
    if (it == ids.end()) return "\"" + *symbols[k] + "\" is not a token of the vocabulary";
    pair[k] = it->second;
    merged += *bytes;
  }
  auto it = ids.find(merged);
  if (it == ids.end()) return "the merge \"" + left + right + "\" is not a token of the vocabulary";
  merges[pair_key(pair[0], pair[1])] = ByteLevelBpeMerge{merges_added++, it->second};
  return "";
}

std::string ByteLevelBpeVocab::find_byte_ids() {
  for (int b = 0; b < 256; ++b) {
    auto it = ids.find(std::string(1, static_cast<char>(b)));
    if (it == ids.end()) return "has no token for byte " + std::to_string(b);
    byte_ids[b] = it->second;
  }
  return "";
}

}  // namespace megacpp::io::data
