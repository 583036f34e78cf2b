// The tokenizer flags, Megatron's and MindSpeed's, as every program that tokenizes takes them
// (megacpp-train, -preprocess, -answer, -caption): declared, defaulted and read in one place.
#pragma once

#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

// --tokenizer-type, --vocab-file, --merge-file, --tokenizer-model, --tokenizer-name-or-path and
// --vocab-size, in the --help group `group`.
void add_tokenizer_flags(cxxopts::Options& options, const std::string& group);

// Those flags' names, without the dashes.
const std::vector<std::string>& tokenizer_flag_names();

// The tokenizer the flags name. Without --tokenizer-type: GPT2BPETokenizer with --vocab-file and
// --merge-file (as pretrain_gpt.py), HuggingFaceTokenizer with a tokenizer folder, else
// ByteLevelTokenizer. Throws std::invalid_argument naming a malformed flag; the files are read
// by build_tokenizer.
TokenizerOptions read_tokenizer_flags(const cxxopts::ParseResult& flags);

}  // namespace megacpp::io::data
