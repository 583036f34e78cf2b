// A Hugging Face tokenizer.json (the `tokenizers` library's file) read into what megacpp's
// HuggingFaceTokenizer runs: byte-level BPE as GPT-2, Llama 3 and Qwen2/3 use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/data/tokenizer/byte_level_bpe_vocab.h"

namespace megacpp::io::data {

struct HfAddedToken {
  int32_t id;
  std::string content;  // raw text, matched in the input before pre-tokenization
  bool normalized;      // matched after the normalizer rather than before
};

struct HfTokenizerSpec {
  std::string path;                 // the tokenizer.json read
  ByteLevelBpeVocab vocab;          // model.vocab and model.merges; added tokens in token_bytes
  bool ignore_merges = false;       // model.ignore_merges
  bool nfc = false;                 // normalizer: NFC (else none)
  std::string split_pattern;        // the pre-tokenizer's regex ("": the whole text is one piece)
  bool add_prefix_space = false;    // ByteLevel pre-tokenizer's add_prefix_space
  std::vector<HfAddedToken> added_tokens;
  std::vector<int64_t> prefix_ids;  // TemplateProcessing's special tokens before the text (BOS)
  std::vector<int64_t> suffix_ids;  // ... and after it
};

// `path` is a folder with tokenizer.json (and tokenizer_config.json, whose eos_token is the
// end-of-document id) or the tokenizer.json itself. Anything megacpp does not implement
// (another model type, normalizer, pre-tokenizer, post-processor) is refused by name; every
// error names `flag` (--tokenizer-model) and the file.
HfTokenizerSpec load_hf_tokenizer(const std::string& path, const std::string& flag);

}  // namespace megacpp::io::data
