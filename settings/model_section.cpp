// The model section (Note [Flag sections]): the family and the shape every model has; the
// families' own flags (settings/model_arguments) and Megatron's architecture and accepted flags
// (settings/megatron_architecture, settings/megatron_flags) join its --help.
#include "megacpp/errors.h"
#include "settings/flag_section.h"
#include "settings/megatron_architecture.h"
#include "settings/megatron_flags.h"
#include "settings/model_arguments.h"

namespace megacpp::settings {
namespace {

void declare_model_flags(cxxopts::Options& o) {
  o.add_options("model")
      ("model-type", "registered model family to build (default: the one Megatron's architecture flags describe)",
       cxxopts::value<std::string>());
  add_model_library_flag(o, "model");
  o.add_options("model")
      ("seq-length", "tokens per sample", cxxopts::value<std::string>()->default_value("128"))
      ("make-vocab-size-divisible-by", "pad the model's vocabulary to a multiple of this", cxxopts::value<std::string>()->default_value("128"))
      ("padded-vocab-size", "the model's vocabulary, instead of the padded tokenizer's (MindSpeed's flag; 0: pad)",
       cxxopts::value<std::string>()->default_value("0"))
      ("init-method-std", "std of normal weight init", cxxopts::value<std::string>()->default_value("0.02"));
  add_model_flags(o);
  add_megatron_architecture_flags(o);
  add_megatron_compatible_flags(o, model_flag_names());
}

// --seq-length, the vocabulary's padding and init flags every model has (the family's and
// --padded-vocab-size are read once the tokenizer is known: parse_arguments).
void read_model_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.make_vocab_size_divisible_by = flag_number<int64_t>(r, "make-vocab-size-divisible-by");
  a.seq_length = flag_number<int64_t>(r, "seq-length");
  a.init_method_std = flag_number<double>(r, "init-method-std");
  require(a.seq_length > 0, "--seq-length must be positive");
  require(a.init_method_std > 0, "--init-method-std must be positive");
  require(a.make_vocab_size_divisible_by > 0, "--make-vocab-size-divisible-by must be positive");
}

}  // namespace

FlagSection model_section() { return {"model", declare_model_flags, read_model_flags}; }

}  // namespace megacpp::settings
