// Constructors of the tokenizers build_tokenizer() hands out (private to io/data/tokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

std::unique_ptr<Tokenizer> make_byte_level_tokenizer();
// Precondition (checked by build_tokenizer): vocab_size > 0.
std::unique_ptr<Tokenizer> make_null_tokenizer(int64_t vocab_size);
// Throws std::invalid_argument naming the file (as --vocab-file / --merge-file) at fault.
std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& vocab_file, const std::string& merge_file);
// `path`: a folder with tokenizer.json, or the file; errors name `flag` and the file.
std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path, const std::string& flag);
// `type`: SentencePieceTokenizer, GPTSentencePieceTokenizer or Llama2Tokenizer; `path` a
// tokenizer.model. Errors name `flag` and the file.
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& type, const std::string& path,
                                                        const std::string& flag);

}  // namespace megacpp::io::data
