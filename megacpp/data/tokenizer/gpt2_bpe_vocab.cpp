// Reads encoder.json and vocab.bpe (see gpt2_bpe_vocab.h) and checks them, so that a bad file
// is reported once, at startup, by path and line rather than as a wrong id later.
#include "megacpp/data/tokenizer/gpt2_bpe_vocab.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace megacpp::data {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";

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

// Raw bytes of a token written in the byte alphabet; nullopt if `text` is not UTF-8 or holds a
// character outside the alphabet.
std::optional<std::string> alphabet_to_bytes(std::string_view text) {
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

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// encoder.json -> token_bytes, eod and the bytes -> id map the merges are resolved with.
std::unordered_map<std::string, int32_t> read_encoder(const std::string& path, Gpt2BpeVocab& vocab) {
  const std::string where = "--vocab-file " + quoted(path) + ": ";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(where + "cannot open");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(where + "not valid JSON (" + e.what() + ")");
  }
  if (!json.is_object()) throw std::invalid_argument(where + "not a JSON object (expected {\"token\": id, ...})");

  const auto size = static_cast<int64_t>(json.size());
  vocab.token_bytes.assign(size, std::string());
  std::vector<bool> seen(size, false);
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(size);
  for (const auto& [token, value] : json.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= size) {
      throw std::invalid_argument(where + "token \"" + token + "\" has id " + value.dump() + ", expected an integer in [0, " +
                                  std::to_string(size) + ")");
    }
    const auto id = value.get<int32_t>();
    if (seen[id]) throw std::invalid_argument(where + "id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    auto bytes = alphabet_to_bytes(token);
    if (!bytes) throw std::invalid_argument(where + "token \"" + token + "\" has a character outside GPT-2's byte alphabet");
    vocab.token_bytes[id] = *bytes;
    ids.emplace(std::move(*bytes), id);
    if (token == kEndOfText) vocab.eod = id;
  }
  if (vocab.eod < 0) throw std::invalid_argument(where + "has no \"" + kEndOfText + "\" token");
  for (int b = 0; b < 256; ++b) {
    auto it = ids.find(std::string(1, static_cast<char>(b)));
    if (it == ids.end()) throw std::invalid_argument(where + "has no token for byte " + std::to_string(b));
    vocab.byte_ids[b] = it->second;
  }
  return ids;
}

// vocab.bpe -> merges. As OpenAI's encoder.py, a later duplicate of a merge wins.
void read_merges(const std::string& path, const std::string& vocab_file,
                 const std::unordered_map<std::string, int32_t>& ids, Gpt2BpeVocab& vocab) {
  const std::string where = "--merge-file " + quoted(path) + ": ";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(where + "cannot open");
  std::string line;
  int32_t rank = 0;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.rfind("#version", 0) == 0) continue;  // "#version: 0.2"
    std::istringstream fields(line);
    std::vector<std::string> symbols;
    for (std::string s; fields >> s;) symbols.push_back(std::move(s));
    if (symbols.empty()) continue;  // the trailing newline
    const std::string at = where + "line " + std::to_string(number) + ": ";
    if (symbols.size() != 2) {
      throw std::invalid_argument(at + "expected two symbols, got " + std::to_string(symbols.size()));
    }
    int32_t pair[2];
    std::string merged;
    for (int k = 0; k < 2; ++k) {
      const auto bytes = alphabet_to_bytes(symbols[k]);
      if (!bytes) throw std::invalid_argument(at + "\"" + symbols[k] + "\" has a character outside GPT-2's byte alphabet");
      auto it = ids.find(*bytes);
      if (it == ids.end()) {
        throw std::invalid_argument(at + "\"" + symbols[k] + "\" is not a token of --vocab-file " + quoted(vocab_file));
      }
      pair[k] = it->second;
      merged += *bytes;
    }
    auto it = ids.find(merged);
    if (it == ids.end()) {
      throw std::invalid_argument(at + "the merge \"" + symbols[0] + symbols[1] + "\" is not a token of --vocab-file " +
                                  quoted(vocab_file));
    }
    vocab.merges[Gpt2BpeVocab::pair_key(pair[0], pair[1])] = Gpt2BpeMerge{rank++, it->second};
  }
  if (in.bad()) throw std::invalid_argument(where + "read error");
}

}  // namespace

Gpt2BpeVocab load_gpt2_bpe_vocab(const std::string& vocab_file, const std::string& merge_file) {
  Gpt2BpeVocab vocab;
  const auto ids = read_encoder(vocab_file, vocab);
  read_merges(merge_file, vocab_file, ids, vocab);
  return vocab;
}

}  // namespace megacpp::data
