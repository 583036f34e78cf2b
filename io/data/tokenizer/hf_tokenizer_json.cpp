// Reads tokenizer.json (Hugging Face `tokenizers`' serialization) and checks every part
// megacpp runs, so that a file it cannot reproduce is refused at startup, by name, rather than
// tokenized differently.
#include "io/data/tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/data/tokenizer/regex_pretokenizer.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Errors name the flag and the file; `where` is "FLAG 'PATH': ".
[[noreturn]] void fail(const std::string& where, const std::string& what) { throw std::invalid_argument(where + what); }

json read_json(const fs::path& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(where, "cannot open " + path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(where, path.filename().string() + " is not valid JSON (" + e.what() + ")");
  }
}

std::string type_of(const json& component) {
  return component.is_object() && component.contains("type") && component["type"].is_string() ? component["type"].get<std::string>()
                                                                                              : "?";
}

bool flag_of(const json& component, const char* key) {
  return component.contains(key) && component[key].is_boolean() && component[key].get<bool>();
}

void read_model(const json& model, const std::string& where, HfTokenizerSpec& spec) {
  if (type_of(model) != "BPE") {
    fail(where, "model type '" + type_of(model) + "' is not supported (megacpp reads byte-level BPE: GPT-2, Llama 3, Qwen; "
                "for a SentencePiece tokenizer.model use --tokenizer-type SentencePieceTokenizer)");
  }
  if (flag_of(model, "byte_fallback")) fail(where, "BPE with byte_fallback (SentencePiece-style BPE) is not supported");
  if (model.contains("dropout") && !model["dropout"].is_null()) fail(where, "BPE dropout is not supported (it samples merges)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty()) {
      fail(where, std::string("BPE with a ") + affix + " is not supported");
    }
  }
  spec.ignore_merges = flag_of(model, "ignore_merges");
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(where, "model.vocab is missing");
  auto& vocab = spec.vocab;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      fail(where, "model.vocab: token \"" + token + "\" has id " + id.dump());
    }
    auto bytes = byte_level_alphabet_to_bytes(token);
    if (!bytes) fail(where, "model.vocab: token \"" + token + "\" has a character outside GPT-2's byte alphabet");
    const auto index = static_cast<size_t>(id.get<int32_t>());
    if (index >= vocab.token_bytes.size()) vocab.token_bytes.resize(index + 1);
    vocab.token_bytes[index] = *bytes;
    vocab.ids.emplace(std::move(*bytes), static_cast<int32_t>(index));
  }
  const std::string problem = vocab.find_byte_ids();
  if (!problem.empty()) fail(where, "model.vocab " + problem);
  if (!model.contains("merges") || !model["merges"].is_array()) fail(where, "model.merges is missing");
  int64_t number = 0;
  for (const auto& merge : model["merges"]) {  // "left right" (tokenizers < 0.20) or ["left", "right"]
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        fail(where, "model.merges[" + std::to_string(number) + "]: expected \"left right\", got \"" + text + "\"");
      }
      left = text.substr(0, space), right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    } else {
      fail(where, "model.merges[" + std::to_string(number) + "]: expected two tokens, got " + merge.dump());
    }
    const std::string merge_problem = vocab.add_merge(left, right);
    if (!merge_problem.empty()) fail(where, "model.merges[" + std::to_string(number) + "]: " + merge_problem);
    ++number;
  }
}

void read_normalizer(const json& normalizer, const std::string& where, HfTokenizerSpec& spec) {
  if (normalizer.is_null()) return;
  const std::string type = type_of(normalizer);
  if (type == "NFC") {
    spec.nfc = true;
  } else if (type == "Sequence" && normalizer.contains("normalizers") && normalizer["normalizers"].is_array()) {
    for (const auto& part : normalizer["normalizers"]) read_normalizer(part, where, spec);
  } else {
    fail(where, "normalizer '" + type + "' is not supported (megacpp has NFC or none)");
  }
}

void read_split(const json& split, const std::string& where, HfTokenizerSpec& spec) {
  const std::string behavior = split.value("behavior", std::string("?"));
  if (behavior != "Isolated" || flag_of(split, "invert")) {
    fail(where, "pre-tokenizer Split with behavior '" + behavior + "'" + (flag_of(split, "invert") ? " and invert" : "") +
                    " is not supported (megacpp has Isolated)");
  }
  const json& pattern = split.contains("pattern") ? split["pattern"] : json();
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    spec.split_pattern = pattern["Regex"].get<std::string>();
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    spec.split_pattern = "\\Q" + pattern["String"].get<std::string>() + "\\E";
  } else {
    fail(where, "pre-tokenizer Split has no pattern");
  }
}

void read_pre_tokenizer(const json& pre, const std::string& where, HfTokenizerSpec& spec) {
  const std::string type = type_of(pre);
  std::vector<json> parts = type == "Sequence" && pre.contains("pretokenizers") ? pre["pretokenizers"].get<std::vector<json>>()
                                                                              : std::vector<json>{pre};
  bool byte_level = false;
  for (const auto& part : parts) {
    const std::string part_type = type_of(part);
    const bool second_split = !spec.split_pattern.empty();
    if (part_type == "Split") {
      if (second_split || byte_level) fail(where, "a pre-tokenizer with two splits is not supported");
      read_split(part, where, spec);
    } else if (part_type == "ByteLevel") {
      byte_level = true;
      spec.add_prefix_space = flag_of(part, "add_prefix_space");
      if (part.value("use_regex", true)) {
        if (second_split) fail(where, "a pre-tokenizer with two splits is not supported");
        spec.split_pattern = kGpt2PretokenizerPattern;
      }
    } else {
      fail(where, "pre-tokenizer '" + part_type + "' is not supported (megacpp has ByteLevel and Split)");
    }
  }
  if (!byte_level) fail(where, "the pre-tokenizer has no ByteLevel step: megacpp reads byte-level BPE only");
}

void read_template(const json& processor, const std::string& where, HfTokenizerSpec& spec) {
  if (!processor.contains("single") || !processor["single"].is_array()) fail(where, "TemplateProcessing has no 'single'");
  bool after_text = false;
  for (const auto& item : processor["single"]) {
    if (item.contains("Sequence")) {
      after_text = true;
      continue;
    }
    const std::string name = item.contains("SpecialToken") ? item["SpecialToken"].value("id", std::string()) : "";
    const json& tokens = processor.value("special_tokens", json::object());
    if (name.empty() || !tokens.contains(name) || !tokens[name].contains("ids")) {
      fail(where, "TemplateProcessing: item " + item.dump() + " names no special token of special_tokens");
    }
    auto& ids = after_text ? spec.suffix_ids : spec.prefix_ids;
    for (const auto& id : tokens[name]["ids"]) ids.push_back(id.get<int64_t>());
  }
}

void read_post_processor(const json& processor, const std::string& where, HfTokenizerSpec& spec) {
  if (processor.is_null()) return;
  const std::string type = type_of(processor);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") return read_template(processor, where, spec);
  if (type == "Sequence" && processor.contains("processors")) {
    for (const auto& part : processor["processors"]) read_post_processor(part, where, spec);
    return;
  }
  fail(where, "post-processor '" + type + "' is not supported (megacpp has ByteLevel and TemplateProcessing)");
}

void read_added_tokens(const json& tokens, const std::string& where, HfTokenizerSpec& spec) {
  for (const auto& token : tokens) {
    const std::string content = token.value("content", std::string());
    if (content.empty() || !token.contains("id") || !token["id"].is_number_integer() || token["id"].get<int64_t>() < 0) {
      fail(where, "added_tokens: " + token.dump() + " needs an id and a content");
    }
    for (const char* option : {"lstrip", "rstrip", "single_word"}) {
      if (flag_of(token, option)) fail(where, "added token \"" + content + "\" with " + option + " is not supported");
    }
    const auto id = token["id"].get<int32_t>();
    auto& bytes = spec.vocab.token_bytes;
    if (static_cast<size_t>(id) >= bytes.size()) bytes.resize(static_cast<size_t>(id) + 1);
    bytes[id] = content;
    spec.added_tokens.push_back(HfAddedToken{id, content, flag_of(token, "normalized")});
  }
}

// The id of eos_token, from tokenizer_config.json or else special_tokens_map.json (as
// transformers reads them; Megatron's eod is the tokenizer's eos_token_id).
int32_t end_of_document_id(const fs::path& dir, const std::string& where, const HfTokenizerSpec& spec) {
  std::string eos;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    if (!eos.empty() || !fs::exists(dir / name)) continue;
    const json config = read_json(dir / name, where);
    const json token = config.value("eos_token", json());
    eos = token.is_string() ? token.get<std::string>() : token.is_object() ? token.value("content", std::string()) : "";
  }
  if (eos.empty()) fail(where, "no eos_token in " + (dir / "tokenizer_config.json").string() + " or special_tokens_map.json");
  for (const auto& token : spec.added_tokens) {
    if (token.content == eos) return token.id;
  }
  const auto bytes = byte_level_alphabet_to_bytes(eos);
  auto it = bytes ? spec.vocab.ids.find(*bytes) : spec.vocab.ids.end();
  if (it == spec.vocab.ids.end()) fail(where, "eos_token \"" + eos + "\" is not a token of " + spec.path);
  return it->second;
}

}  // namespace

HfTokenizerSpec load_hf_tokenizer(const std::string& path, const std::string& flag) {
  const fs::path file = fs::is_directory(path) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  const std::string where = flag + " '" + path + "': ";
  const json root = read_json(file, where);
  if (!root.is_object() || !root.contains("model")) fail(where, file.string() + " has no 'model': not a tokenizer.json");
  HfTokenizerSpec spec;
  spec.path = file.string();
  const std::string at = where + file.filename().string() + ": ";
  read_model(root["model"], at, spec);
  read_normalizer(root.value("normalizer", json()), at, spec);
  if (root.value("pre_tokenizer", json()).is_null()) fail(at, "has no pre-tokenizer: megacpp reads byte-level BPE only");
  read_pre_tokenizer(root["pre_tokenizer"], at, spec);
  read_post_processor(root.value("post_processor", json()), at, spec);
  read_added_tokens(root.value("added_tokens", json::array()), at, spec);
  spec.vocab.eod = end_of_document_id(file.parent_path(), where, spec);
  return spec;
}

}  // namespace megacpp::io::data
