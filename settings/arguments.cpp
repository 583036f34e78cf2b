#include "settings/arguments.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <cxxopts.hpp>

#include "settings/argument_rules.h"
#include "settings/command_line.h"
#include "io/data/image_text_dataset.h"
#include "checkpoint/checkpoint_model.h"
#include "megacpp/checked_math.h"
#include "megacpp/errors.h"
#include "settings/megatron_architecture.h"
#include "settings/megatron_flags.h"
#include "settings/model_arguments.h"
#include "models/registry.h"

namespace megacpp::settings {
namespace {

// Numbers are read as text and converted here, so a malformed value names its flag.
template <class T>
T number(const cxxopts::ParseResult& r, const std::string& flag) {
  return models::parse_flag_number<T>(flag, r[flag].as<std::string>());
}

// pretrain_gpt.py's args_defaults make GPT2BPETokenizer Megatron's tokenizer when the flag is
// left out; megacpp's own default, without GPT-2's files, is its byte-level tokenizer.
std::string default_tokenizer_type(const cxxopts::ParseResult& r, const io::data::TokenizerOptions& tokenizer) {
  if (r.count("tokenizer-type")) return r["tokenizer-type"].as<std::string>();
  return !tokenizer.vocab_file.empty() && !tokenizer.merge_file.empty() ? "GPT2BPETokenizer" : "ByteLevelTokenizer";
}

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

// --seq-length, the vocabulary and init flags every model has.
void read_model_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.tokenizer.vocab_size = number<int64_t>(r, "vocab-size");
  a.make_vocab_size_divisible_by = number<int64_t>(r, "make-vocab-size-divisible-by");
  a.seq_length = number<int64_t>(r, "seq-length");
  a.init_method_std = number<double>(r, "init-method-std");
}

// Batches, iterations, the learning-rate schedule and the optimizer.
void read_schedule_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.micro_batch_size = number<int64_t>(r, "micro-batch-size");
  a.global_batch_size = number<int64_t>(r, "global-batch-size");
  for (const auto& word : split_words(r["rampup-batch-size"].as<std::string>())) {
    a.rampup_batch_size.push_back(models::parse_flag_number<int64_t>("rampup-batch-size", word));
  }
  a.train_iters = number<int64_t>(r, "train-iters");
  a.train_samples = number<int64_t>(r, "train-samples");
  if (a.train_samples != 0 && r.count("train-iters") > 0) throw std::invalid_argument("--train-iters and --train-samples exclude each other");
  a.lr_warmup_samples = number<int64_t>(r, "lr-warmup-samples");
  a.lr_decay_samples = number<int64_t>(r, "lr-decay-samples");
  if (!r["lr-warmup-fraction"].as<std::string>().empty()) a.lr_warmup_fraction = number<double>(r, "lr-warmup-fraction");
  a.lr_warmup_init = number<double>(r, "lr-warmup-init");
  a.lr = number<double>(r, "lr");
  a.min_lr = number<double>(r, "min-lr");
  a.lr_warmup_iters = number<int64_t>(r, "lr-warmup-iters");
  a.lr_decay_iters = number<int64_t>(r, "lr-decay-iters");
  a.lr_decay_style = r["lr-decay-style"].as<std::string>();
  a.weight_decay = number<double>(r, "weight-decay");
  a.adam_beta1 = number<double>(r, "adam-beta1");
  a.adam_beta2 = number<double>(r, "adam-beta2");
  a.adam_eps = number<double>(r, "adam-eps");
  a.clip_grad = number<double>(r, "clip-grad");
  for (auto [flag, value] : {std::pair{"decoupled-lr", &a.decoupled_lr}, {"decoupled-min-lr", &a.decoupled_min_lr}}) {
    if (r[flag].as<std::string>().empty()) continue;
    *value = number<double>(r, flag);
    if (*value < 0) throw std::invalid_argument("--" + std::string(flag) + " must be >= 0");
  }
  a.check_for_nan_in_loss_and_grad = !r["no-check-for-nan-in-loss-and-grad"].as<bool>();
  a.seed = number<uint64_t>(r, "seed");
}

// LoRA (models/lora.h). MindSpeed-LLM spells the rank --lora-r and lists targets with spaces.
void read_lora_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.lora.rank = number<int64_t>(r, "lora-rank");
  if (!r["lora-r"].as<std::string>().empty()) {
    const auto rank = number<int64_t>(r, "lora-r");
    if (r.count("lora-rank") > 0 && rank != a.lora.rank) throw std::invalid_argument("--lora-r and --lora-rank differ; give one");
    a.lora.rank = rank;
  }
  a.lora.alpha = number<double>(r, "lora-alpha");
  a.lora.dropout = number<double>(r, "lora-dropout");
  std::string targets = r["lora-target-modules"].as<std::string>();
  std::replace(targets.begin(), targets.end(), ',', ' ');
  a.lora.target_modules = split_words(targets);
  a.lora_load = r["lora-load"].as<std::string>();
  a.lora_save_base = r["lora-save-base"].as<bool>();
  if (a.lora_save_base && r["lora-ckpt-filter"].as<bool>()) {
    throw std::invalid_argument("--lora-save-base and --lora-ckpt-filter contradict each other (base weights saved, or the adapters only)");
  }
  if (a.lora.rank < 0) throw std::invalid_argument("--lora-rank must be >= 0 (0: no LoRA)");
  if (a.lora.rank == 0) {
    for (const char* flag : {"lora-target-modules", "lora-alpha", "lora-dropout", "lora-load", "lora-save-base", "lora-ckpt-filter"}) {
      if (r.count(flag) > 0) throw std::invalid_argument("--" + std::string(flag) + " needs --lora-rank > 0");
    }
    return;
  }
  require(a.lora.alpha > 0, "--lora-alpha must be > 0");
  require(a.lora.dropout >= 0 && a.lora.dropout < 1, "--lora-dropout must be in [0, 1)");
  require(!a.lora.target_modules.empty(), "--lora-target-modules: name the modules to adapt (e.g. q_proj,v_proj)");
  require(!a.lora_save_base || !r["save"].as<std::string>().empty(), "--lora-save-base needs --save");
}

// Data, tokenizer and data loading.
void read_data_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.mock_data = r["mock-data"].as<bool>();
  a.data_path = split_words(r["data-path"].as<std::string>());
  a.split = r["split"].as<std::string>();
  a.image_mean = parse_channel_values("image-mean", r["image-mean"].as<std::string>());
  a.image_std = parse_channel_values("image-std", r["image-std"].as<std::string>());
  for (const char* flag : {"image-mean", "image-std"}) {
    if (r.count(flag) && !io::data::is_image_text_path(a.data_path)) {
      throw std::invalid_argument("--" + std::string(flag) + " applies to image-text data (--data-path FILE.jsonl) only");
    }
  }
  if (r.count("calculate-per-token-loss") && io::data::is_image_text_path(a.data_path)) {
    throw std::invalid_argument(
        "--calculate-per-token-loss is not supported on image-text data: its loss mask makes micro-batches count "
        "different numbers of tokens, and megacpp averages each micro-batch's masked tokens, then the micro-batches "
        "and ranks (Megatron's default); leave the flag out");
  }
  a.tokenizer.vocab_file = r["vocab-file"].as<std::string>();
  a.tokenizer.merge_file = r["merge-file"].as<std::string>();
  a.tokenizer.type = default_tokenizer_type(r, a.tokenizer);
  a.flag_values["tokenizer-type"] = a.tokenizer.type;
  io::data::set_tokenizer_model(a.tokenizer, r["tokenizer-model"].as<std::string>(), r["tokenizer-name-or-path"].as<std::string>());
  a.eval_interval = number<int64_t>(r, "eval-interval");
  a.eval_iters = number<int64_t>(r, "eval-iters");
  a.exit_interval = number<int64_t>(r, "exit-interval");
  a.num_workers = number<int>(r, "num-workers");
  a.dataloader_type = r["dataloader-type"].as<std::string>();
  a.data_cache_path = r["data-cache-path"].as<std::string>();
  a.exit_duration_in_mins = number<double>(r, "exit-duration-in-mins");
}

// Precision, FSDP2 and recompute.
void read_engine_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.bf16 = r["bf16"].as<bool>();
  a.fp16 = r["fp16"].as<bool>();
  a.loss_scale = number<double>(r, "loss-scale");
  a.initial_loss_scale = number<double>(r, "initial-loss-scale");
  a.min_loss_scale = number<double>(r, "min-loss-scale");
  a.loss_scale_window = number<int64_t>(r, "loss-scale-window");
  a.hysteresis = number<int64_t>(r, "hysteresis");
  a.grad_reduce_in_bf16 = r["grad-reduce-in-bf16"].as<bool>();
  // Megatron's sharded optimizer is FSDP2's (megatron_flags.cpp says so in the log).
  a.use_torch_fsdp2 = r["use-torch-fsdp2"].as<bool>() || r.count("use-distributed-optimizer") > 0;
  if (!a.use_torch_fsdp2 && (a.bf16 || a.fp16)) {
    a.use_torch_fsdp2 = true;
    a.notes.push_back(std::string(a.bf16 ? "--bf16" : "--fp16") +
                      " without --use-torch-fsdp2: megacpp's mixed precision is FSDP2's (fp32 masters, sharded, and " +
                      (a.bf16 ? "bf16" : "fp16") +
                      " compute), as Megatron's mixed-precision optimizer keeps fp32 main weights; FSDP2 is turned on: the "
                      "same updates, less memory per rank");
  }
  a.fsdp2_config_path = r["fsdp2-config-path"].as<std::string>();
  a.init_model_with_meta_device = r["init-model-with-meta-device"].as<bool>();
  a.distributed_timeout_minutes = number<int>(r, "distributed-timeout-minutes");
  a.context_parallel_size = number<int>(r, "context-parallel-size");
  a.context_parallel_algo = r["context-parallel-algo"].as<std::string>();
  a.recompute_granularity = r["recompute-granularity"].as<std::string>();
  if (r["recompute-activations"].as<bool>()) {  // Megatron: recompute_activations sets the granularity
    if (!a.recompute_granularity.empty() && a.recompute_granularity != "selective") {
      throw std::invalid_argument("--recompute-activations (selective) contradicts --recompute-granularity " + a.recompute_granularity);
    }
    a.recompute_granularity = "selective";
  }
  a.recompute_method = r["recompute-method"].as<std::string>();
  a.recompute_num_layers = number<int64_t>(r, "recompute-num-layers");
  a.empty_unused_memory_level = number<int>(r, "empty-unused-memory-level");
  if (a.recompute_method == "uniform" && a.recompute_num_layers > 1) {
    a.notes.push_back("--recompute-method uniform --recompute-num-layers " + std::to_string(a.recompute_num_layers) +
                      ": megacpp recomputes each layer on its own (Megatron checkpoints that many layers together): the "
                      "same computation, with every layer's input kept");
  }
}

UnexpectedKeys unexpected_keys_policy(const std::string& value) {
  if (value == "raise_unexpected" || value == "raise_all") return UnexpectedKeys::kRaise;
  if (value == "log_unexpected" || value == "log_all") return UnexpectedKeys::kLog;
  if (value == "assume_ok_unexpected" || value == "ignore_all") return UnexpectedKeys::kIgnore;
  throw std::invalid_argument("--dist-ckpt-strictness: '" + value +
                              "' is not one of raise_unexpected, raise_all, log_unexpected, log_all, assume_ok_unexpected, "
                              "ignore_all (Megatron's return_* values only make sense from Python)");
}

// Logging, TensorBoard, profiling, checkpoints.
void read_output_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.log_interval = number<int64_t>(r, "log-interval");
  a.peak_tflops = number<double>(r, "peak-tflops");
  a.tensorboard_dir = r["tensorboard-dir"].as<std::string>();
  a.tensorboard_log_interval = number<int64_t>(r, "tensorboard-log-interval");
  a.dump_final_params = r["dump-final-params"].as<std::string>();
  a.profile = r["profile"].as<bool>();
  a.profile_step_start = number<int64_t>(r, "profile-step-start");
  a.profile_step_end = number<int64_t>(r, "profile-step-end");
  a.profile_ranks.clear();
  for (const auto& rank : split_words(r["profile-ranks"].as<std::string>())) a.profile_ranks.push_back(models::parse_flag_number<int>("profile-ranks", rank));
  a.profile_dir = r["profile-save-path"].as<std::string>();
  if (a.profile_dir.empty()) a.profile_dir = a.tensorboard_dir.empty() ? "profile" : a.tensorboard_dir;
  a.save = r["save"].as<std::string>();
  a.save_interval = number<int64_t>(r, "save-interval");
  a.load = r["load"].as<std::string>();
  a.ckpt_step = number<int64_t>(r, "ckpt-step");
  a.ckpt_format = checkpoint::CheckpointFormat::named(r["ckpt-format"].as<std::string>());
  a.no_save_optim = r["no-save-optim"].as<bool>();
  a.no_load_optim = r["no-load-optim"].as<bool>();
  a.no_load_rng = r["no-load-rng"].as<bool>();
  a.no_save_rng = r["no-save-rng"].as<bool>();
  a.exit_on_missing_checkpoint = r["exit-on-missing-checkpoint"].as<bool>();
  a.use_checkpoint_args = r["use-checkpoint-args"].as<bool>();
  a.finetune = r["finetune"].as<bool>();
  a.dist_ckpt_strictness = r["dist-ckpt-strictness"].as<std::string>();
  a.unexpected_keys = unexpected_keys_policy(a.dist_ckpt_strictness);
  a.async_save = r["async-save"].as<bool>();
  a.no_initialization = r["no-initialization"].as<bool>();
}

// The tokenizer's vocabulary, then the model the family builds from the flags (or, with
// --use-checkpoint-args, the checkpoint's).
void build_model_config(TrainingArguments& a, const cxxopts::ParseResult& r, const ModelFamilyChoice& family) {
  const int64_t stated_vocab = a.tokenizer.vocab_size;  // with another tokenizer, a check (Megatron's scripts give it)
  if (a.tokenizer.type != "NullTokenizer") a.tokenizer.vocab_size = 0;
  validate_arguments(a);
  a.tokenizer_vocab_size = io::data::build_tokenizer(a.tokenizer)->vocab_size();
  if (a.tokenizer.type != "NullTokenizer" && stated_vocab != 0 && stated_vocab != a.tokenizer_vocab_size) {
    throw std::invalid_argument("--vocab-size " + std::to_string(stated_vocab) + " is not the vocabulary of " + a.tokenizer.type +
                                " (" + std::to_string(a.tokenizer_vocab_size) + "); leave --vocab-size out or make them agree");
  }
  const int64_t padded = number<int64_t>(r, "padded-vocab-size");
  if (padded != 0 && padded < a.tokenizer_vocab_size) {
    throw std::invalid_argument("--padded-vocab-size " + std::to_string(padded) + " is smaller than the vocabulary of " +
                                a.tokenizer.type + " (" + std::to_string(a.tokenizer_vocab_size) + ")");
  }
  const int64_t vocab = padded != 0 ? padded : io::data::padded_vocab_size(a.tokenizer_vocab_size, a.make_vocab_size_divisible_by);
  try {
    a.model = model_config_from_flags(r, a.model_type, {vocab, a.seq_length});
  } catch (const std::invalid_argument& e) {
    if (family.reason == "--model-type") throw;
    throw std::invalid_argument(std::string(e.what()) + " (--model-type " + a.model_type + ": " + family.reason + ")");
  }
  if (a.use_checkpoint_args) use_checkpoint_model(a);
}

}  // namespace

std::array<double, 3> parse_channel_values(const std::string& flag, const std::string& text) {
  std::string words_text = text;
  std::replace(words_text.begin(), words_text.end(), ',', ' ');
  const std::vector<std::string> words = split_words(words_text);
  if (words.size() != 1 && words.size() != 3) {
    throw std::invalid_argument("--" + flag + " '" + text + "': expected 3 numbers (one per channel) or 1");
  }
  std::array<double, 3> out{};
  for (size_t i = 0; i < 3; ++i) out[i] = models::parse_flag_number<double>(flag, words[words.size() == 1 ? 0 : i]);
  return out;
}

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
  record_flag_values(a, r);
  read_model_flags(a, r);
  read_schedule_flags(a, r);
  read_data_flags(a, r);
  read_engine_flags(a, r);
  read_lora_flags(a, r);
  std::string frozen = r["freeze-module-prefix"].as<std::string>();
  std::replace(frozen.begin(), frozen.end(), ',', ' ');
  a.freeze_module_prefix = split_words(frozen);
  read_output_flags(a, r);
  build_model_config(a, r, line.family);
  return a;
}

int64_t gradient_accumulation_steps(const TrainingArguments& args, int data_parallel_size) {
  const int64_t per_step = checked_product(
      {{args.micro_batch_size, "--micro-batch-size"}, {data_parallel_size, "data-parallel size"}}, "the samples per micro-step");
  const int64_t global = args.global_batch_size > 0 ? args.global_batch_size : per_step;
  require(global % per_step == 0,
          "--global-batch-size (" + std::to_string(global) + ") must be divisible by --micro-batch-size (" +
              std::to_string(args.micro_batch_size) + ") x data-parallel size (" + std::to_string(data_parallel_size) + ")");
  return global / per_step;
}

}  // namespace megacpp::settings
