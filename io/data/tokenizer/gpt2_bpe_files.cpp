// Reads GPT-2's encoder.json and vocab.bpe and checks them, so that a bad file is reported once,
// at startup, by path and line rather than as a wrong id later.
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/data/tokenizer/byte_level_bpe_vocab.h"

namespace megacpp::io::data {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// encoder.json -> token_bytes, ids, byte_ids and eod.
void read_encoder(const std::string& path, ByteLevelBpeVocab& vocab) {
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
  vocab.ids.reserve(size);
  for (const auto& [token, value] : json.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= size) {
      throw std::invalid_argument(where + "token \"" + token + "\" has id " + value.dump() + ", expected an integer in [0, " +
                                  std::to_string(size) + ")");
    }
    const auto id = value.get<int32_t>();
    if (seen[id]) throw std::invalid_argument(where + "id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    auto bytes = byte_level_alphabet_to_bytes(token);
    if (!bytes) throw std::invalid_argument(where + "token \"" + token + "\" has a character outside GPT-2's byte alphabet");
    vocab.token_bytes[id] = *bytes;
    vocab.ids.emplace(std::move(*bytes), id);
    if (token == kEndOfText) vocab.eod = id;
  }
  if (vocab.eod < 0) throw std::invalid_argument(where + "has no \"" + kEndOfText + "\" token");
  const std::string problem = vocab.find_byte_ids();
  if (!problem.empty()) throw std::invalid_argument(where + problem);
}

// vocab.bpe -> merges.
void read_merges(const std::string& path, const std::string& vocab_file, ByteLevelBpeVocab& vocab) {
  const std::string where = "--merge-file " + quoted(path) + ": ";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(where + "cannot open");
  std::string line;
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
    const std::string problem = vocab.add_merge(symbols[0], symbols[1]);
    if (!problem.empty()) throw std::invalid_argument(at + problem + " (--vocab-file " + quoted(vocab_file) + ")");
  }
  if (in.bad()) throw std::invalid_argument(where + "read error");
}

}  // namespace

ByteLevelBpeVocab load_gpt2_bpe_vocab(const std::string& vocab_file, const std::string& merge_file) {
  ByteLevelBpeVocab vocab;
  read_encoder(vocab_file, vocab);
  read_merges(merge_file, vocab_file, vocab);
  return vocab;
}

}  // namespace megacpp::io::data
