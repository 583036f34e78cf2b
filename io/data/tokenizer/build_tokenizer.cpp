// build_tokenizer: TokenizerOptions (the --tokenizer-type family of flags) -> a Tokenizer,
// with each missing or wrong flag reported by name.
#include <stdexcept>
#include <utility>

#include "io/data/tokenizer/builtin_tokenizers.h"

namespace megacpp::io::data {

namespace {

constexpr char kKnownTypes[] =
    "GPT2BPETokenizer, HuggingFaceTokenizer (or PretrainedFromHF), SentencePieceTokenizer, GPTSentencePieceTokenizer, "
    "Llama2Tokenizer, ByteLevelTokenizer, NullTokenizer";

bool is_hugging_face(const std::string& type) { return type == "HuggingFaceTokenizer" || type == "PretrainedFromHF"; }
bool is_sentencepiece(const std::string& type) {
  return type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer";
}

// A file flag the tokenizer type does not read is a mistake, not something to ignore.
void refuse_unread_files(const TokenizerOptions& options) {
  const bool gpt2 = options.type == "GPT2BPETokenizer";
  const std::pair<const char*, bool> unread[] = {
      {"--vocab-file", !gpt2 && !options.vocab_file.empty()},
      {"--merge-file", !gpt2 && !options.merge_file.empty()},
      {nullptr, !is_hugging_face(options.type) && !is_sentencepiece(options.type) && !options.tokenizer_model.empty()},
  };
  for (const auto& [flag, given] : unread) {
    if (!given) continue;
    const std::string name = flag != nullptr ? flag : options.tokenizer_model_flag;
    throw std::invalid_argument(name + " is not read by --tokenizer-type " + options.type + " (" + name + " is for " +
                                (flag != nullptr ? "GPT2BPETokenizer" : "HuggingFaceTokenizer and the SentencePiece ones") + ")");
  }
}

// A --vocab-size given with another tokenizer than NullTokenizer is a check of its vocabulary
// (Megatron's scripts state it).
std::unique_ptr<Tokenizer> checked_vocabulary(std::unique_ptr<Tokenizer> tokenizer, const TokenizerOptions& options) {
  if (options.vocab_size != 0 && options.vocab_size != tokenizer->vocab_size()) {
    throw std::invalid_argument("--vocab-size " + std::to_string(options.vocab_size) + " is not the vocabulary of " + options.type +
                                " (" + std::to_string(tokenizer->vocab_size()) + "); leave --vocab-size out or make them agree");
  }
  return tokenizer;
}

std::unique_ptr<Tokenizer> build_named_tokenizer(const TokenizerOptions& options) {
  refuse_unread_files(options);
  if (is_hugging_face(options.type)) {
    if (options.tokenizer_model.empty()) {
      throw std::invalid_argument("--tokenizer-type " + options.type +
                                  " needs --tokenizer-model (or --tokenizer-name-or-path): a folder with tokenizer.json");
    }
    return make_hf_tokenizer(options.tokenizer_model, options.tokenizer_model_flag);
  }
  if (is_sentencepiece(options.type)) {
    if (options.tokenizer_model.empty()) {
      throw std::invalid_argument("--tokenizer-type " + options.type + " needs --tokenizer-model (a SentencePiece tokenizer.model)");
    }
    return make_sentencepiece_tokenizer(options.type, options.tokenizer_model, options.tokenizer_model_flag);
  }
  if (options.type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty()) {
      throw std::invalid_argument("--tokenizer-type GPT2BPETokenizer needs --vocab-file (GPT-2's encoder.json)");
    }
    if (options.merge_file.empty()) {
      throw std::invalid_argument("--tokenizer-type GPT2BPETokenizer needs --merge-file (GPT-2's vocab.bpe)");
    }
    return make_gpt2_bpe_tokenizer(options.vocab_file, options.merge_file);
  }
  if (options.type == "ByteLevelTokenizer") return make_byte_level_tokenizer();
  if (options.type == "NullTokenizer") {
    if (options.vocab_size <= 0) {
      throw std::invalid_argument("--tokenizer-type NullTokenizer needs --vocab-size > 0 (got " +
                                  std::to_string(options.vocab_size) + ")");
    }
    return make_null_tokenizer(options.vocab_size);
  }
  throw std::invalid_argument("--tokenizer-type '" + options.type + "': unknown tokenizer (known: " + kKnownTypes + ")");
}

}  // namespace

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& options) {
  auto tokenizer = build_named_tokenizer(options);
  return options.type == "NullTokenizer" ? std::move(tokenizer) : checked_vocabulary(std::move(tokenizer), options);
}

void set_tokenizer_model(TokenizerOptions& options, const std::string& tokenizer_model,
                         const std::string& tokenizer_name_or_path) {
  if (!tokenizer_model.empty() && !tokenizer_name_or_path.empty() && tokenizer_model != tokenizer_name_or_path) {
    throw std::invalid_argument("--tokenizer-model '" + tokenizer_model + "' and --tokenizer-name-or-path '" +
                                tokenizer_name_or_path + "' differ: give one");
  }
  options.tokenizer_model = tokenizer_model.empty() ? tokenizer_name_or_path : tokenizer_model;
  options.tokenizer_model_flag = tokenizer_model.empty() && !tokenizer_name_or_path.empty() ? "--tokenizer-name-or-path"
                                                                                          : "--tokenizer-model";
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by) {
  if (divisible_by <= 1) return vocab_size;
  return (vocab_size + divisible_by - 1) / divisible_by * divisible_by;
}

}  // namespace megacpp::io::data
