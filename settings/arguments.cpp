#include "settings/arguments.h"

#include <set>
#include <stdexcept>

#include <cxxopts.hpp>

#include "checkpoint/checkpoint_model.h"
#include "io/data/tokenizer/tokenizer.h"
#include "megacpp/checked_math.h"
#include "models/registry.h"
#include "settings/argument_rules.h"
#include "settings/command_line.h"
#include "settings/flag_section.h"
#include "settings/hf_model_arguments.h"
#include "settings/megatron_architecture.h"
#include "settings/megatron_flags.h"
#include "settings/model_arguments.h"

namespace megacpp::settings {
namespace {

// Megatron's --use-checkpoint-args: the model is the --load checkpoint's, whatever the model
// flags say. Without a checkpoint the flags stand (Megatron warns), unless
// --exit-on-missing-checkpoint.
void use_checkpoint_model(TrainingArguments& a) {
  // --ckpt-step is the adapters' iteration when --lora-load gives them.
  const bool step_of_load = a.ckpt_step >= 0 && a.lora_load.empty();
  const auto reader = checkpoint::CheckpointReader::open(a.load, step_of_load ? std::optional<int64_t>(a.ckpt_step) : std::nullopt);
  if (!reader) {
    if (a.exit_on_missing_checkpoint) {
      throw std::invalid_argument("--use-checkpoint-args: --load " + a.load + " has no checkpoint and --exit-on-missing-checkpoint is given");
    }
    a.notes.push_back("--use-checkpoint-args: --load " + a.load + " has no checkpoint; the model flags stand");
    return;
  }
  const auto model = checkpoint::checkpoint_model(*reader);
  const int64_t vocab = model->to_args().value("padded_vocab_size", int64_t{0});
  if (vocab > 0 && vocab < a.tokenizer_vocab_size) {
    throw std::invalid_argument("--use-checkpoint-args: the model of " + reader->dir() + " has a vocabulary of " + std::to_string(vocab) +
                                ", smaller than " + a.tokenizer.type + "'s " + std::to_string(a.tokenizer_vocab_size));
  }
  a.model = model;
  a.model_type = model->model_type();
  a.notes.push_back("--use-checkpoint-args: the model of " + reader->dir() + " (--model-type " + a.model_type + " " +
                    model->to_flags() + "), not the model flags");
}

// What the log's arguments block shows: every flag given, and the defaults of megacpp's own
// flags and of the chosen family's (not those of the Megatron flags accepted as descriptions,
// nor another family's model flags).
void record_flag_values(TrainingArguments& a, const cxxopts::ParseResult& r) {
  std::set<std::string> not_read;
  for (const auto& name : model_flag_names()) not_read.insert(name);
  for (const auto& flag : models::model_family(a.model_type).flags()) not_read.erase(flag.name);
  for (const auto& value : r.defaults()) {
    const std::string& flag = value.key();
    if (is_megatron_compatible_flag(flag) || is_megatron_architecture_flag(flag) || not_read.count(flag)) continue;
    a.flag_values[flag] = value.value();
  }
  for (const auto& value : r.arguments()) a.flag_values[value.key()] = value.value();
  a.flag_values["model-type"] = a.model_type;
  a.flag_values.erase("help");
}

// --init-from-hf-path: the folder's model, its vocabulary the embedding's rows (Note [Hugging
// Face folders]), which the tokenizer must fit.
void build_hf_folder_model(TrainingArguments& a, const cxxopts::ParseResult& r, int64_t padded_flag) {
  a.model = hf_folder_model(r, a.model_type, a.init_from_hf_path, a.seq_length);
  const int64_t vocab = a.model->to_args().value("padded_vocab_size", int64_t{0});
  const std::string where = "the model of --init-from-hf-path " + a.init_from_hf_path + " has a vocabulary of " + std::to_string(vocab);
  if (vocab > 0 && vocab < a.tokenizer_vocab_size) {
    throw std::invalid_argument(where + ", smaller than " + a.tokenizer.type + "'s " + std::to_string(a.tokenizer_vocab_size));
  }
  if (padded_flag != 0 && padded_flag != vocab) throw std::invalid_argument(where + ", not --padded-vocab-size " + std::to_string(padded_flag));
  if (r.count("make-vocab-size-divisible-by")) {
    a.notes.push_back("--make-vocab-size-divisible-by: the vocabulary is " + std::to_string(vocab) + ", that of --init-from-hf-path's model");
  }
  if (a.use_checkpoint_args) use_checkpoint_model(a);
}

// The tokenizer's vocabulary, then the model the family builds from the flags (or, with
// --use-checkpoint-args, the checkpoint's; with --init-from-hf-path, the folder's).
void build_model_config(TrainingArguments& a, const cxxopts::ParseResult& r, const ModelFamilyChoice& family) {
  validate_arguments(a);
  {
    const auto tokenizer = io::data::build_tokenizer(a.tokenizer);  // checks a --vocab-size given with another tokenizer
    a.tokenizer_vocab_size = tokenizer->vocab_size();
    a.tokenizer_eod = tokenizer->eod();
  }
  if (a.tokenizer.type != "NullTokenizer") a.tokenizer.vocab_size = 0;  // it was a check, done
  const int64_t padded = flag_number<int64_t>(r, "padded-vocab-size");
  if (!a.init_from_hf_path.empty()) {
    build_hf_folder_model(a, r, padded);
    return;
  }
  if (padded != 0 && padded < a.tokenizer_vocab_size) {
    throw std::invalid_argument("--padded-vocab-size " + std::to_string(padded) + " is smaller than the vocabulary of " +
                                a.tokenizer.type + " (" + std::to_string(a.tokenizer_vocab_size) + ")");
  }
  // Megatron's padding: to a multiple of --make-vocab-size-divisible-by times the TP size, so that
  // each tensor-parallel rank holds an equal slice of it (Note [Vocabulary parallelism]).
  const int64_t multiple = checked_product({{a.make_vocab_size_divisible_by, "--make-vocab-size-divisible-by"},
                                            {a.tensor_model_parallel_size, "--tensor-model-parallel-size"}},
                                           "the multiple the vocabulary is padded to");
  const std::string named = a.tensor_model_parallel_size > 1 ? "--make-vocab-size-divisible-by x --tensor-model-parallel-size"
                                                             : "--make-vocab-size-divisible-by";
  checked_sum({{a.tokenizer_vocab_size, a.tokenizer.type + "'s vocabulary"}, {multiple, named}},
              "the vocabulary padded to a multiple of " + named);
  const int64_t vocab = padded != 0 ? padded : io::data::padded_vocab_size(a.tokenizer_vocab_size, multiple);
  try {
    a.model = model_config_from_flags(r, a.model_type, {vocab, a.seq_length});
  } catch (const std::invalid_argument& e) {
    if (family.reason == "--model-type") throw;
    throw std::invalid_argument(std::string(e.what()) + " (--model-type " + a.model_type + ": " + family.reason + ")");
  }
  if (a.use_checkpoint_args) use_checkpoint_model(a);
}

}  // namespace

TrainingArguments parse_arguments(int argc, const char* const* argv, bool* help) {
  const CommandLine line = parse_command_line(argc, argv);
  if (help) *help = line.help;
  if (line.help) return {};
  const cxxopts::ParseResult& r = line.result;
  TrainingArguments a;
  a.model_libraries = line.libraries;
  a.notes = megatron_flag_notes(r);
  a.model_type = line.family.model_type;
  a.notes.insert(a.notes.end(), line.family.notes.begin(), line.family.notes.end());
  a.notes.insert(a.notes.end(), line.notes.begin(), line.notes.end());
  std::vector<std::string> problems = line.problems;
  if (problems.empty()) record_flag_values(a, r);  // needs the family
  for (const auto& section : flag_sections()) {  // Note [Flag sections]; each refusal of each, all at once
    try {
      section.read(a, r);
    } catch (const std::invalid_argument& e) {
      problems.emplace_back(e.what());
    }
  }
  if (!problems.empty()) refuse_flags(problems);
  build_model_config(a, r, line.family);
  return a;
}

}  // namespace megacpp::settings
