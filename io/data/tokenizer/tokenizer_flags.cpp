#include "io/data/tokenizer/tokenizer_flags.h"

#include <charconv>
#include <stdexcept>

namespace megacpp::io::data {

void add_tokenizer_flags(cxxopts::Options& options, const std::string& group) {
  auto text = [] { return cxxopts::value<std::string>()->default_value(""); };
  options.add_options(group)
      ("tokenizer-type", "ByteLevelTokenizer, GPT2BPETokenizer, HuggingFaceTokenizer (or PretrainedFromHF) or NullTokenizer "
       "(default: GPT2BPETokenizer with --vocab-file and --merge-file, as pretrain_gpt.py, HuggingFaceTokenizer with a "
       "tokenizer folder, else ByteLevelTokenizer)", cxxopts::value<std::string>())
      ("vocab-file", "GPT2BPETokenizer: encoder.json", text())
      ("merge-file", "GPT2BPETokenizer: vocab.bpe", text())
      ("tokenizer-model", "HuggingFaceTokenizer: a folder with tokenizer.json (or the file)", text())
      ("tokenizer-name-or-path", "MindSpeed's spelling of --tokenizer-model", text())
      ("vocab-size", "NullTokenizer: ids are 0..N-1, eod is N", cxxopts::value<std::string>()->default_value("0"));
}

const std::vector<std::string>& tokenizer_flag_names() {
  static const std::vector<std::string> names = {"tokenizer-type", "vocab-file", "merge-file", "tokenizer-model", "tokenizer-name-or-path",
                                                 "vocab-size"};
  return names;
}

TokenizerOptions read_tokenizer_flags(const cxxopts::ParseResult& flags) {
  TokenizerOptions o;
  o.vocab_file = flags["vocab-file"].as<std::string>();
  o.merge_file = flags["merge-file"].as<std::string>();
  set_tokenizer_model(o, flags["tokenizer-model"].as<std::string>(), flags["tokenizer-name-or-path"].as<std::string>());
  if (flags.count("tokenizer-type")) {
    o.type = flags["tokenizer-type"].as<std::string>();
  } else if (!o.vocab_file.empty() && !o.merge_file.empty()) {
    o.type = "GPT2BPETokenizer";
  } else if (!o.tokenizer_model.empty()) {
    o.type = "HuggingFaceTokenizer";
  }
  const std::string size = flags["vocab-size"].as<std::string>();
  const auto [end, error] = std::from_chars(size.data(), size.data() + size.size(), o.vocab_size);
  if (error != std::errc() || end != size.data() + size.size() || o.vocab_size < 0) {
    throw std::invalid_argument("--vocab-size '" + size + "': expected a non-negative integer");
  }
  return o;
}

}  // namespace megacpp::io::data
