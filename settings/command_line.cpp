#include "settings/command_line.h"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "settings/megatron_flags.h"
#include "settings/model_arguments.h"
#include "models/registry.h"

namespace megacpp::settings {
namespace {

cxxopts::Options training_options() {
  cxxopts::Options o("megacpp-train", "Train a transformer language model with FSDP2 (Megatron-style flags)");
  o.add_options("model")
      ("model-type", "registered model family to build (default: the one Megatron's architecture flags describe)",
       cxxopts::value<std::string>())
      ("model-library", "shared library that registers model families (loaded before the flags are read; may repeat)",
       cxxopts::value<std::vector<std::string>>())
      ("seq-length", "tokens per sample", cxxopts::value<std::string>()->default_value("128"))
      ("vocab-size", "NullTokenizer: ids 0..N-1 (the model's vocabulary is N + 1, padded)", cxxopts::value<std::string>()->default_value("0"))
      ("make-vocab-size-divisible-by", "pad the model's vocabulary to a multiple of this", cxxopts::value<std::string>()->default_value("128"))
      ("padded-vocab-size", "the model's vocabulary, instead of the padded tokenizer's (MindSpeed's flag; 0: pad)",
       cxxopts::value<std::string>()->default_value("0"))
      ("init-method-std", "std of normal weight init", cxxopts::value<std::string>()->default_value("0.02"));
  add_model_flags(o);
  add_megatron_architecture_flags(o);
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
  o.add_options("lora")
      ("lora-rank", "train LoRA adapters of this rank on --lora-target-modules, the rest frozen (0: no LoRA)",
       cxxopts::value<std::string>()->default_value("0"))
      ("lora-r", "MindSpeed-LLM's spelling of --lora-rank", cxxopts::value<std::string>()->default_value(""))
      ("lora-alpha", "LoRA's alpha: adapters are scaled by alpha / rank", cxxopts::value<std::string>()->default_value("32"))
      ("lora-dropout", "dropout on the adapters' input in training", cxxopts::value<std::string>()->default_value("0"))
      ("lora-target-modules", "the Linear layers to adapt, PEFT's names (q_proj,k_proj,v_proj,o_proj,... or all-linear)",
       cxxopts::value<std::string>()->default_value(""))
      ("lora-load", "resume the adapters (and the optimizer, iteration, RNG) from this checkpoint root; --load gives the base",
       cxxopts::value<std::string>()->default_value(""))
      ("lora-save-base", "--save writes the frozen base weights too (default: the adapters only)")
      ("lora-ckpt-filter", "MindSpeed-LLM's flag for saving the adapters only: the default here")
      ("freeze-module-prefix", "freeze the parameters under these module paths (comma- or space-separated; ROLL's "
       "model_args.freeze_module_prefix)", cxxopts::value<std::string>()->default_value(""));
  o.add_options("data")
      ("mock-data", "synthetic token batches that depend only on the seed and sample index")
      ("data-path", "dataset prefix (PREFIX.bin/.idx or FILE.h5), a blend: W1 PREFIX1 W2 PREFIX2 ..., or image-text FILE.jsonl",
       cxxopts::value<std::string>()->default_value(""))
      ("split", "train,validation,test proportions of each dataset's sequences", cxxopts::value<std::string>()->default_value("969,30,1"))
      ("image-mean", "image-text data: the per-channel mean images are normalized with (CLIP's)",
       cxxopts::value<std::string>()->default_value("0.48145466,0.4578275,0.40821073"))
      ("image-std", "image-text data: the per-channel std images are normalized with (CLIP's)",
       cxxopts::value<std::string>()->default_value("0.26862954,0.26130258,0.27577711"))
      ("tokenizer-type", "ByteLevelTokenizer, GPT2BPETokenizer, HuggingFaceTokenizer (or PretrainedFromHF) or NullTokenizer "
       "(default: GPT2BPETokenizer with --vocab-file and --merge-file, as pretrain_gpt.py, else ByteLevelTokenizer)",
       cxxopts::value<std::string>())
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
      ("context-parallel-size", "split each sequence over this many consecutive ranks (Ulysses; ROLL's ulysses_size)",
       cxxopts::value<std::string>()->default_value("1"))
      ("context-parallel-algo", "ulysses_cp_algo (DeepSpeed-Ulysses: attention trades the sequence split for a head split)",
       cxxopts::value<std::string>()->default_value("ulysses_cp_algo"))
      ("recompute-granularity", "full: recompute whole layers in backward (with --recompute-method); selective: each "
       "layer's core attention", cxxopts::value<std::string>()->default_value(""))
      ("recompute-activations", "Megatron's shorthand for --recompute-granularity selective")
      ("recompute-method", "uniform: every layer; block: the first --recompute-num-layers", cxxopts::value<std::string>()->default_value(""))
      ("recompute-num-layers", "layers recomputed with --recompute-method block", cxxopts::value<std::string>()->default_value("0"))
      ("empty-unused-memory-level", "1 or 2: return the device's cached memory after each iteration (0: keep it)",
       cxxopts::value<std::string>()->default_value("0"));
  o.add_options("checkpointing")
      ("save", "save checkpoints under this directory (DIR/iter_0000100/)", cxxopts::value<std::string>()->default_value(""))
      ("save-interval", "iterations between checkpoints (one is also saved at the end)", cxxopts::value<std::string>()->default_value("0"))
      ("load", "resume from the latest checkpoint under this directory", cxxopts::value<std::string>()->default_value(""))
      ("ckpt-step", "with --load (--lora-load when given): the iteration to load instead of the latest", cxxopts::value<std::string>()->default_value("-1"))
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

// Megatron's --data-path takes several words ("0.7 A 0.3 B"), --spec two (a module and a
// function), --rampup-batch-size three, --profile-ranks and MindSpeed's --lora-target-modules a list; cxxopts takes one value per flag, so the words up to the next flag are joined into
// that one value here.
std::vector<std::string> join_multi_word_flags(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    out.emplace_back(argv[i]);
    const std::string& flag = out.back();
    if (flag != "--data-path" && flag != "--spec" && flag != "--profile-ranks" && flag != "--rampup-batch-size" &&
        flag != "--lora-target-modules") {
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

// One error for everything wrong on the command line, each problem on its own line.
[[noreturn]] void refuse(const std::vector<std::string>& problems) {
  std::string message = problems.size() == 1 ? problems.front() : std::to_string(problems.size()) + " flags are not accepted:";
  for (size_t i = 0; problems.size() > 1 && i < problems.size(); ++i) message += "\n  " + problems[i];
  throw std::invalid_argument(message);
}

}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string w; stream >> w;) words.push_back(w);
  return words;
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  CommandLine line;
  line.libraries = model_libraries_in(argc, argv);
  for (const auto& path : line.libraries) models::load_model_library(path);
  cxxopts::Options options = training_options();
  const std::vector<std::string> words = join_multi_word_flags(argc, argv);
  std::vector<const char*> joined_argv;
  for (const auto& w : words) joined_argv.push_back(w.c_str());
  options.allow_unrecognised_options();  // collected below, all reported at once
  try {
    line.result = options.parse(static_cast<int>(joined_argv.size()), joined_argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  std::vector<std::string> problems = unrecognised_arguments(words, line.result.unmatched());
  for (auto& problem : megatron_flag_problems(line.result, model_flag_names())) problems.push_back(std::move(problem));
  line.help = line.result["help"].as<bool>();
  if (line.help && problems.empty()) {  // --help: the flags, whatever the model flags say
    std::cout << options.help() << std::endl;
    return line;
  }
  try {
    line.family = choose_model_family(line.result);  // an unknown --model-type fails here, listing the known ones
  } catch (const std::invalid_argument& e) {
    problems.emplace_back(e.what());
  }
  if (!problems.empty()) refuse(problems);
  return line;
}

}  // namespace megacpp::settings
