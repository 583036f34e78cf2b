#include "megacpp/arguments.h"

#include <iostream>
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <cxxopts.hpp>

#include "megacpp/argument_rules.h"
#include "checkpoint/checkpoint_model.h"
#include "megacpp/checked_math.h"
#include "megacpp/megatron_flags.h"
#include "megacpp/model_arguments.h"
#include "models/registry.h"

namespace megacpp {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-train", "Train a transformer language model with FSDP2 (Megatron-style flags)");
  o.add_options("model")
      ("model-type", "registered model family to build", cxxopts::value<std::string>()->default_value(models::kDefaultModelType))
      ("model-library", "shared library that registers model families (loaded before the flags are read; may repeat)",
       cxxopts::value<std::vector<std::string>>())
      ("seq-length", "tokens per sample", cxxopts::value<std::string>()->default_value("128"))
      ("vocab-size", "NullTokenizer: ids 0..N-1 (the model's vocabulary is N + 1, padded)", cxxopts::value<std::string>()->default_value("0"))
      ("make-vocab-size-divisible-by", "pad the model's vocabulary to a multiple of this", cxxopts::value<std::string>()->default_value("128"))
      ("padded-vocab-size", "the model's vocabulary, instead of the padded tokenizer's (MindSpeed's flag; 0: pad)",
       cxxopts::value<std::string>()->default_value("0"))
      ("init-method-std", "std of normal weight init", cxxopts::value<std::string>()->default_value("0.02"));
  add_model_flags(o);
  add_megatron_compatible_flags(o, model_flag_names());
  o.add_options("training")
      ("micro-batch-size", "samples per micro-batch per rank", cxxopts::value<std::string>()->default_value("1"))
      ("global-batch-size", "samples per iteration (default: micro x data parallel)", cxxopts::value<std::string>()->default_value("0"))
      ("rampup-batch-size", "START INCREMENT SAMPLES: the global batch grows from START by INCREMENT to --global-batch-size "
       "over SAMPLES samples", cxxopts::value<std::string>()->default_value(""))
      ("train-iters", "iterations to train", cxxopts::value<std::string>()->default_value("10"))
      ("lr", "peak learning rate", cxxopts::value<std::string>()->default_value("1e-4"))
      ("min-lr", "final learning rate", cxxopts::value<std::string>()->default_value("0"))
      ("lr-warmup-iters", "linear warmup iterations", cxxopts::value<std::string>()->default_value("0"))
      ("lr-decay-iters", "decay iterations (default: train iters)", cxxopts::value<std::string>()->default_value("0"))
      ("lr-decay-style", "constant, linear or cosine", cxxopts::value<std::string>()->default_value("cosine"))
      ("train-samples", "samples to train, instead of --train-iters (iterations: the whole global batches in it)",
       cxxopts::value<std::string>()->default_value("0"))
      ("lr-warmup-samples", "linear warmup samples (with --train-samples)", cxxopts::value<std::string>()->default_value("0"))
      ("lr-decay-samples", "decay samples (with --train-samples; default: train samples)",
       cxxopts::value<std::string>()->default_value("0"))
      ("lr-warmup-fraction", "warmup as a fraction of the decay, instead of --lr-warmup-iters / --lr-warmup-samples",
       cxxopts::value<std::string>()->default_value(""))
      ("lr-warmup-init", "the learning rate warmup starts from", cxxopts::value<std::string>()->default_value("0"))
      ("weight-decay", "AdamW weight decay (not applied to 1-D params)", cxxopts::value<std::string>()->default_value("0.01"))
      ("adam-beta1", "AdamW beta1", cxxopts::value<std::string>()->default_value("0.9"))
      ("adam-beta2", "AdamW beta2", cxxopts::value<std::string>()->default_value("0.999"))
      ("adam-eps", "AdamW epsilon", cxxopts::value<std::string>()->default_value("1e-8"))
      ("clip-grad", "clip gradients to this global norm (0: off)", cxxopts::value<std::string>()->default_value("1.0"))
      ("decoupled-lr", "peak learning rate of the input and output layers (default: --lr)", cxxopts::value<std::string>()->default_value(""))
      ("decoupled-min-lr", "final learning rate of the input and output layers (default: --min-lr)",
       cxxopts::value<std::string>()->default_value(""))
      ("no-check-for-nan-in-loss-and-grad", "go on when a loss or the gradient norm is NaN or Inf (by default the run stops)")
      ("seed", "random seed", cxxopts::value<std::string>()->default_value("1234"))
      ("bf16", "bf16 mixed precision (FSDP2 param_dtype bf16, reduce_dtype fp32)")
      ("fp16", "fp16 mixed precision with loss scaling (FSDP2 param_dtype fp16, reduce_dtype fp32)")
      ("loss-scale", "a constant loss scale (default: dynamic with --fp16)", cxxopts::value<std::string>()->default_value("0"))
      ("initial-loss-scale", "--fp16: the dynamic loss scale to start from", cxxopts::value<std::string>()->default_value("4294967296"))
      ("min-loss-scale", "--fp16: the dynamic loss scale's floor", cxxopts::value<std::string>()->default_value("1"))
      ("loss-scale-window", "--fp16: iterations without overflow before the scale doubles",
       cxxopts::value<std::string>()->default_value("1000"))
      ("hysteresis", "--fp16: overflowing iterations before the scale halves", cxxopts::value<std::string>()->default_value("2"))
      ("grad-reduce-in-bf16", "reduce gradients in bf16 (FSDP2 reduce_dtype bf16)");
  o.add_options("data")
      ("mock-data", "synthetic token batches that depend only on the seed and sample index")
      ("data-path", "dataset prefix (PREFIX.bin/.idx or FILE.h5), or a blend: W1 PREFIX1 W2 PREFIX2 ...",
       cxxopts::value<std::string>()->default_value(""))
      ("split", "train,validation,test proportions of each dataset's sequences", cxxopts::value<std::string>()->default_value("969,30,1"))
      ("tokenizer-type", "ByteLevelTokenizer, GPT2BPETokenizer, HuggingFaceTokenizer (or PretrainedFromHF) or NullTokenizer",
       cxxopts::value<std::string>()->default_value("ByteLevelTokenizer"))
      ("vocab-file", "GPT2BPETokenizer: encoder.json", cxxopts::value<std::string>()->default_value(""))
      ("merge-file", "GPT2BPETokenizer: vocab.bpe", cxxopts::value<std::string>()->default_value(""))
      ("tokenizer-model", "HuggingFaceTokenizer: a folder with tokenizer.json (or the file)", cxxopts::value<std::string>()->default_value(""))
      ("tokenizer-name-or-path", "MindSpeed's spelling of --tokenizer-model", cxxopts::value<std::string>()->default_value(""));
  o.add_options("data loading")
      ("dataloader-type", "single: the training samples in order; cyclic: a random order drawn anew each pass",
       cxxopts::value<std::string>()->default_value("single"))
      ("num-workers", "threads that read the next iteration's micro-batches while one computes (0: read when needed)",
       cxxopts::value<std::string>()->default_value("2"))
      ("data-cache-path", "keep the datasets' sample indices here and reuse them in later runs", cxxopts::value<std::string>()->default_value(""));
  o.add_options("evaluation")
      ("eval-interval", "iterations between validation runs", cxxopts::value<std::string>()->default_value("1000"))
      ("eval-iters", "validation batches per run (0: no validation)", cxxopts::value<std::string>()->default_value("100"))
      ("exit-interval", "stop after the iteration that is a multiple of this (0: never)", cxxopts::value<std::string>()->default_value("0"))
      ("exit-duration-in-mins", "stop (saving first) after the iteration that ends this many minutes after the start (0: never)",
       cxxopts::value<std::string>()->default_value("0"));
  o.add_options("parallel")
      ("use-torch-fsdp2", "shard parameters, gradients and optimizer state with FSDP2")
      ("fsdp2-config-path", "fsdp2_config.yaml", cxxopts::value<std::string>()->default_value(""))
      ("init-model-with-meta-device", "build the model without memory, allocate only local shards")
      ("distributed-timeout-minutes", "timeout of rendezvous and collectives", cxxopts::value<std::string>()->default_value("10"))
      ("recompute-granularity", "full: recompute whole layers in backward (with --recompute-method)",
       cxxopts::value<std::string>()->default_value(""))
      ("recompute-method", "uniform: every layer; block: the first --recompute-num-layers", cxxopts::value<std::string>()->default_value(""))
      ("recompute-num-layers", "layers recomputed with --recompute-method block", cxxopts::value<std::string>()->default_value("0"))
      ("empty-unused-memory-level", "1 or 2: return the device's cached memory after each iteration (0: keep it)",
       cxxopts::value<std::string>()->default_value("0"));
  o.add_options("checkpointing")
      ("save", "save checkpoints under this directory (DIR/iter_0000100/)", cxxopts::value<std::string>()->default_value(""))
      ("save-interval", "iterations between checkpoints (one is also saved at the end)", cxxopts::value<std::string>()->default_value("0"))
      ("load", "resume from the latest checkpoint under this directory", cxxopts::value<std::string>()->default_value(""))
      ("ckpt-step", "with --load: the iteration to load instead of the latest", cxxopts::value<std::string>()->default_value("-1"))
      ("ckpt-format", "torch_dist (Megatron) or torch_dcp (PyTorch DCP)", cxxopts::value<std::string>()->default_value("torch_dist"))
      ("no-save-optim", "do not save the optimizer state")
      ("no-load-optim", "do not load the optimizer state")
      ("no-load-rng", "do not load the random number generator states")
      ("no-save-rng", "do not save the random number generator states")
      ("exit-on-missing-checkpoint", "stop when --load has no checkpoint instead of training from scratch")
      ("use-checkpoint-args", "train the model the --load checkpoint holds (its args), not the one the model flags describe")
      ("finetune", "load only the model weights and start at iteration 0")
      ("dist-ckpt-strictness", "tensors in the --load checkpoint the model does not have: raise_unexpected, raise_all, "
       "log_unexpected, log_all, assume_ok_unexpected or ignore_all (the last four need --finetune)",
       cxxopts::value<std::string>()->default_value("raise_unexpected"))
      ("async-save", "write checkpoints in the background while training goes on")
      ("no-initialization", "skip weight initialization (the weights come from --load)");
  o.add_options("logging")
      ("log-interval", "iterations between log lines", cxxopts::value<std::string>()->default_value("100"))
      ("peak-tflops", "peak TFLOP/s of one device, to log model FLOPs utilization (MFU)", cxxopts::value<std::string>()->default_value("0"))
      ("tensorboard-dir", "write TensorBoard event files here (rank 0)", cxxopts::value<std::string>()->default_value(""))
      ("tensorboard-log-interval", "iterations between TensorBoard points", cxxopts::value<std::string>()->default_value("1"))
      ("profile", "trace the iterations after --profile-step-start up to --profile-step-end with libtorch's profiler")
      ("profile-step-start", "profiling starts after this iteration", cxxopts::value<std::string>()->default_value("10"))
      ("profile-step-end", "profiling stops after this iteration", cxxopts::value<std::string>()->default_value("12"))
      ("profile-ranks", "the ranks that profile", cxxopts::value<std::string>()->default_value("0"))
      ("profile-save-path", "where the traces go (default: --tensorboard-dir, else ./profile)",
       cxxopts::value<std::string>()->default_value(""))
      ("dump-final-params", "after training, write the gathered fp32 parameters to this file (torch archive)",
       cxxopts::value<std::string>()->default_value(""))
      ("h,help", "print this help");
  return o;
}

// Numbers are read as text and converted here, so a malformed value names its flag.
template <class T>
T number(const cxxopts::ParseResult& r, const std::string& flag) {
  return models::parse_flag_number<T>(flag, r[flag].as<std::string>());
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string w; stream >> w;) words.push_back(w);
  return words;
}

// Megatron's --data-path takes several words ("0.7 A 0.3 B"), --spec two (a module and a
// function), --rampup-batch-size three and --profile-ranks a list; cxxopts takes one value per flag, so the words up to the next flag are joined into
// that one value here.
std::vector<std::string> join_multi_word_flags(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    out.emplace_back(argv[i]);
    const std::string& flag = out.back();
    if (flag != "--data-path" && flag != "--spec" && flag != "--profile-ranks" && flag != "--rampup-batch-size") {
      continue;  // the others are not Megatron's nargs='*'/'+'/3 flags
    }
    std::string joined;
    while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) joined += (joined.empty() ? "" : " ") + std::string(argv[++i]);
    out.push_back(joined);
  }
  return out;
}

// What cxxopts did not recognise (`unmatched`, in the order of `words`): each unknown flag with
// megacpp's reason when it is a Megatron flag megacpp does not support, and each stray word that
// is not a value of such a flag (the words after it up to the next flag, as Megatron's flags may
// take several: --rampup-batch-size 16 16 5859375).
std::vector<std::string> unrecognised_arguments(const std::vector<std::string>& words, std::vector<std::string> unmatched) {
  std::vector<std::string> problems;
  bool after_unknown_flag = false;
  for (size_t i = 1; i < words.size(); ++i) {
    auto it = std::find(unmatched.begin(), unmatched.end(), words[i]);
    if (it == unmatched.end()) {
      after_unknown_flag = after_unknown_flag && words[i].rfind("-", 0) != 0;
      continue;
    }
    unmatched.erase(it);
    const std::string& word = words[i];
    if (word.size() > 1 && word[0] == '-') {
      const std::string name = word.substr(word.find_first_not_of('-'), word.find('=') - word.find_first_not_of('-'));
      const std::string reason = unsupported_flag_reason(name);
      problems.push_back("--" + name + ": " + (reason.empty() ? "unknown flag (see --help)" : "not supported: " + reason));
      after_unknown_flag = word.find('=') == std::string::npos;
    } else if (!after_unknown_flag) {
      problems.push_back("unexpected argument '" + word + "'");
    }  // else a value of the unknown flag
  }
  return problems;
}

// Megatron's --use-checkpoint-args: the model is the --load checkpoint's, whatever the model
// flags say. Without a checkpoint the flags stand (Megatron warns), unless
// --exit-on-missing-checkpoint.
void use_checkpoint_model(TrainingArguments& a) {
  const auto reader = checkpoint::CheckpointReader::open(a.load, a.ckpt_step >= 0 ? std::optional<int64_t>(a.ckpt_step) : std::nullopt);
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

}  // namespace

TrainingArguments parse_arguments(int argc, const char* const* argv, bool* help) {
  const std::vector<std::string> libraries = model_libraries_in(argc, argv);
  for (const auto& path : libraries) models::load_model_library(path);
  cxxopts::Options options = make_options();
  cxxopts::ParseResult r;
  const std::vector<std::string> words = join_multi_word_flags(argc, argv);
  std::vector<const char*> joined_argv;
  for (const auto& w : words) joined_argv.push_back(w.c_str());
  options.allow_unrecognised_options();  // collected below, all reported at once
  try {
    r = options.parse(static_cast<int>(joined_argv.size()), joined_argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  std::vector<std::string> problems = unrecognised_arguments(words, r.unmatched());
  for (auto& problem : megatron_flag_problems(r, model_flag_names())) problems.push_back(std::move(problem));
  if (!problems.empty()) {
    std::string message = problems.size() == 1 ? problems.front() : std::to_string(problems.size()) + " flags are not accepted:";
    for (size_t i = 0; problems.size() > 1 && i < problems.size(); ++i) message += "\n  " + problems[i];
    throw std::invalid_argument(message);
  }
  if (help) *help = r["help"].as<bool>();
  if (r["help"].as<bool>()) {
    std::cout << options.help() << std::endl;
    return {};
  }
  TrainingArguments a;
  a.model_type = r["model-type"].as<std::string>();
  a.model_libraries = libraries;
  a.notes = megatron_flag_notes(r);
  for (const auto& value : r.defaults()) {
    if (!is_megatron_compatible_flag(value.key())) a.flag_values[value.key()] = value.value();  // given ones only
  }
  for (const auto& value : r.arguments()) a.flag_values[value.key()] = value.value();
  a.flag_values.erase("help");
  models::model_family(a.model_type);  // an unknown name fails first, listing the known ones
  a.tokenizer.vocab_size = number<int64_t>(r, "vocab-size");
  a.make_vocab_size_divisible_by = number<int64_t>(r, "make-vocab-size-divisible-by");
  a.seq_length = number<int64_t>(r, "seq-length");
  a.init_method_std = number<double>(r, "init-method-std");
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
  a.mock_data = r["mock-data"].as<bool>();
  a.data_path = split_words(r["data-path"].as<std::string>());
  a.split = r["split"].as<std::string>();
  a.tokenizer.type = r["tokenizer-type"].as<std::string>();
  a.tokenizer.vocab_file = r["vocab-file"].as<std::string>();
  a.tokenizer.merge_file = r["merge-file"].as<std::string>();
  data::set_tokenizer_model(a.tokenizer, r["tokenizer-model"].as<std::string>(), r["tokenizer-name-or-path"].as<std::string>());
  a.eval_interval = number<int64_t>(r, "eval-interval");
  a.eval_iters = number<int64_t>(r, "eval-iters");
  a.exit_interval = number<int64_t>(r, "exit-interval");
  a.num_workers = number<int>(r, "num-workers");
  a.dataloader_type = r["dataloader-type"].as<std::string>();
  a.data_cache_path = r["data-cache-path"].as<std::string>();
  a.exit_duration_in_mins = number<double>(r, "exit-duration-in-mins");
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
  a.fsdp2_config_path = r["fsdp2-config-path"].as<std::string>();
  a.init_model_with_meta_device = r["init-model-with-meta-device"].as<bool>();
  a.distributed_timeout_minutes = number<int>(r, "distributed-timeout-minutes");
  a.recompute_granularity = r["recompute-granularity"].as<std::string>();
  a.recompute_method = r["recompute-method"].as<std::string>();
  a.recompute_num_layers = number<int64_t>(r, "recompute-num-layers");
  a.empty_unused_memory_level = number<int>(r, "empty-unused-memory-level");
  if (a.recompute_method == "uniform" && a.recompute_num_layers > 1) {
    a.notes.push_back("--recompute-method uniform --recompute-num-layers " + std::to_string(a.recompute_num_layers) +
                      ": megacpp recomputes each layer on its own (Megatron checkpoints that many layers together): the "
                      "same computation, with every layer's input kept");
  }
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
  a.async_save = r["async-save"].as<bool>();
  a.no_initialization = r["no-initialization"].as<bool>();
  const int64_t stated_vocab = a.tokenizer.vocab_size;  // with another tokenizer, a check (Megatron's scripts give it)
  if (a.tokenizer.type != "NullTokenizer") a.tokenizer.vocab_size = 0;
  validate_arguments(a);
  a.tokenizer_vocab_size = data::build_tokenizer(a.tokenizer)->vocab_size();
  if (a.tokenizer.type != "NullTokenizer" && stated_vocab != 0 && stated_vocab != a.tokenizer_vocab_size) {
    throw std::invalid_argument("--vocab-size " + std::to_string(stated_vocab) + " is not the vocabulary of " + a.tokenizer.type +
                                " (" + std::to_string(a.tokenizer_vocab_size) + "); leave --vocab-size out or make them agree");
  }
  const int64_t padded = number<int64_t>(r, "padded-vocab-size");
  if (padded != 0 && padded < a.tokenizer_vocab_size) {
    throw std::invalid_argument("--padded-vocab-size " + std::to_string(padded) + " is smaller than the vocabulary of " +
                                a.tokenizer.type + " (" + std::to_string(a.tokenizer_vocab_size) + ")");
  }
  const int64_t vocab = padded != 0 ? padded : data::padded_vocab_size(a.tokenizer_vocab_size, a.make_vocab_size_divisible_by);
  a.model = model_config_from_flags(r, a.model_type, {vocab, a.seq_length});
  if (a.use_checkpoint_args) use_checkpoint_model(a);
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

}  // namespace megacpp
