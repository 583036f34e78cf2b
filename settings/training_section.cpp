// The training section (Note [Flag sections]): batches, iterations, the learning-rate schedule,
// the optimizer, mixed precision and loss scaling, the NaN check and the seed.
#include <stdexcept>
#include <utility>

#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_training_flags(cxxopts::Options& o) {
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
      ("grad-reduce-in-bf16", "reduce gradients in bf16 (FSDP2 reduce_dtype bf16)")
      ("loss-compute-mode", "default: the output layer's logits at once; chunk: --loss-chunk-size tokens at a time, each "
       "chunk's gradients made as its loss is (MindSpeed-LLM's chunk loss: less memory, the same loss)",
       cxxopts::value<std::string>()->default_value("default"))
      ("loss-chunk-size", "tokens per chunk with --loss-compute-mode chunk", cxxopts::value<std::string>()->default_value("1024"))
      ("calculate-per-token-loss", "the loss summed over every label of the global batch and divided by their count, "
       "not the mean of each micro-batch's mean (Megatron's; they differ when loss masks or sequence lengths do)")
      ("no-kernel-fusion", "libtorch's composition of each operation instead of megacpp's fused CPU kernels (RMSNorm, "
       "rotary embedding, SwiGLU, cross-entropy, AdamW, bf16/half Linear layers as fp32 products): the same results, for comparison")
      ("no-rope-fusion", "the rotary embedding in libtorch operations instead of megacpp's fused CPU kernel (Megatron's)")
      ("no-bias-swiglu-fusion", "SwiGLU in libtorch operations instead of megacpp's fused CPU kernel (Megatron's)");
}

// Megatron's rules: iterations or samples, not both; the warmup given once.
void check_schedule(const TrainingArguments& a) {
  require(a.train_iters > 0, "--train-iters must be positive");
  require(a.lr >= 0, "--lr must be >= 0");
  require(a.min_lr >= 0 && a.min_lr <= a.lr, "--min-lr must be in [0, --lr]");
  require(a.lr_warmup_iters >= 0, "--lr-warmup-iters must be >= 0");
  require(a.lr_decay_iters >= 0, "--lr-decay-iters must be >= 0");
  require(a.lr_decay_style == "constant" || a.lr_decay_style == "linear" || a.lr_decay_style == "cosine",
          "--lr-decay-style must be constant, linear or cosine (got '" + a.lr_decay_style + "')");
  require(a.train_samples >= 0 && a.lr_warmup_samples >= 0 && a.lr_decay_samples >= 0,
          "--train-samples, --lr-warmup-samples and --lr-decay-samples must be >= 0");
  if (a.train_samples > 0) {
    require(a.lr_warmup_iters == 0 && a.lr_decay_iters == 0,
            "--train-samples counts the schedule in samples: give --lr-warmup-samples / --lr-decay-samples, not the iteration flags");
  } else {
    require(a.lr_warmup_samples == 0 && a.lr_decay_samples == 0, "--lr-warmup-samples and --lr-decay-samples need --train-samples");
  }
  if (a.lr_warmup_fraction >= 0) {
    require(a.lr_warmup_fraction <= 1, "--lr-warmup-fraction must be in [0, 1]");
    require(a.lr_warmup_iters == 0 && a.lr_warmup_samples == 0,
            "--lr-warmup-fraction excludes --lr-warmup-iters and --lr-warmup-samples");
  }
  require(a.lr_warmup_init >= 0 && a.lr_warmup_init <= a.lr, "--lr-warmup-init must be in [0, --lr]");
  if (a.decoupled_lr >= 0) {
    require(a.lr_warmup_init <= a.decoupled_lr, "--lr-warmup-init must be <= --decoupled-lr (the warmup starts there too)");
    require(a.decoupled_min_lr <= a.decoupled_lr, "--decoupled-min-lr must be in [0, --decoupled-lr]");
  } else {
    require(a.decoupled_min_lr < 0, "--decoupled-min-lr needs --decoupled-lr");
  }
}

void check_training_flags(const TrainingArguments& a) {
  require(a.micro_batch_size > 0, "--micro-batch-size must be positive");
  if (!a.rampup_batch_size.empty()) {
    require(a.rampup_batch_size.size() == 3 && a.rampup_batch_size[0] > 0 && a.rampup_batch_size[1] > 0 && a.rampup_batch_size[2] > 0,
            "--rampup-batch-size takes three positive integers: the start batch, the increment and the ramp-up samples");
    require(a.global_batch_size > 0, "--rampup-batch-size needs --global-batch-size (the batch it ramps up to)");
  }
  require(a.global_batch_size >= 0, "--global-batch-size must be >= 0 (0: micro batch x data-parallel size)");
  check_schedule(a);
  require(a.weight_decay >= 0, "--weight-decay must be >= 0");
  require(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "--adam-beta1 must be in [0, 1)");
  require(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "--adam-beta2 must be in [0, 1)");
  require(a.adam_eps > 0, "--adam-eps must be positive");
  require(a.clip_grad >= 0, "--clip-grad must be >= 0");
  require(!(a.bf16 && a.fp16), "--bf16 and --fp16 exclude each other");
  require(a.loss_scale >= 0, "--loss-scale must be >= 0 (0: dynamic with --fp16)");
  require(a.initial_loss_scale > 0 && a.min_loss_scale > 0, "--initial-loss-scale and --min-loss-scale must be positive");
  require(a.loss_scale_window >= 1 && a.hysteresis >= 1, "--loss-scale-window and --hysteresis must be >= 1");
}

void read_training_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.micro_batch_size = flag_number<int64_t>(r, "micro-batch-size");
  a.global_batch_size = flag_number<int64_t>(r, "global-batch-size");
  for (const auto& word : split_words(r["rampup-batch-size"].as<std::string>())) {
    a.rampup_batch_size.push_back(models::parse_flag_number<int64_t>("rampup-batch-size", word));
  }
  a.train_iters = flag_number<int64_t>(r, "train-iters");
  a.train_samples = flag_number<int64_t>(r, "train-samples");
  if (a.train_samples != 0 && r.count("train-iters") > 0) throw std::invalid_argument("--train-iters and --train-samples exclude each other");
  a.lr_warmup_samples = flag_number<int64_t>(r, "lr-warmup-samples");
  a.lr_decay_samples = flag_number<int64_t>(r, "lr-decay-samples");
  if (!r["lr-warmup-fraction"].as<std::string>().empty()) a.lr_warmup_fraction = flag_number<double>(r, "lr-warmup-fraction");
  a.lr_warmup_init = flag_number<double>(r, "lr-warmup-init");
  a.lr = flag_number<double>(r, "lr");
  a.min_lr = flag_number<double>(r, "min-lr");
  a.lr_warmup_iters = flag_number<int64_t>(r, "lr-warmup-iters");
  a.lr_decay_iters = flag_number<int64_t>(r, "lr-decay-iters");
  a.lr_decay_style = r["lr-decay-style"].as<std::string>();
  a.weight_decay = flag_number<double>(r, "weight-decay");
  a.adam_beta1 = flag_number<double>(r, "adam-beta1");
  a.adam_beta2 = flag_number<double>(r, "adam-beta2");
  a.adam_eps = flag_number<double>(r, "adam-eps");
  a.clip_grad = flag_number<double>(r, "clip-grad");
  for (auto [flag, value] : {std::pair{"decoupled-lr", &a.decoupled_lr}, {"decoupled-min-lr", &a.decoupled_min_lr}}) {
    if (r[flag].as<std::string>().empty()) continue;
    *value = flag_number<double>(r, flag);
    if (*value < 0) throw std::invalid_argument("--" + std::string(flag) + " must be >= 0");
  }
  a.check_for_nan_in_loss_and_grad = !r["no-check-for-nan-in-loss-and-grad"].as<bool>();
  a.seed = flag_number<uint64_t>(r, "seed");
  a.bf16 = r["bf16"].as<bool>();
  a.fp16 = r["fp16"].as<bool>();
  a.loss_scale = flag_number<double>(r, "loss-scale");
  a.initial_loss_scale = flag_number<double>(r, "initial-loss-scale");
  a.min_loss_scale = flag_number<double>(r, "min-loss-scale");
  a.loss_scale_window = flag_number<int64_t>(r, "loss-scale-window");
  a.hysteresis = flag_number<int64_t>(r, "hysteresis");
  const std::string mode = r["loss-compute-mode"].as<std::string>();
  require(mode == "default" || mode == "chunk", "--loss-compute-mode " + mode + ": expected default or chunk");
  const auto chunk = flag_number<int64_t>(r, "loss-chunk-size");
  require(chunk > 0, "--loss-chunk-size must be positive");
  a.loss_chunk_size = mode == "chunk" ? chunk : 0;
  a.grad_reduce_in_bf16 = r["grad-reduce-in-bf16"].as<bool>();
  a.calculate_per_token_loss = r["calculate-per-token-loss"].as<bool>();
  a.kernel_fusion = !r["no-kernel-fusion"].as<bool>();
  a.rope_fusion = !r["no-rope-fusion"].as<bool>();
  a.swiglu_fusion = !r["no-bias-swiglu-fusion"].as<bool>();
  check_training_flags(a);
}

}  // namespace

FlagSection training_section() { return {"training", declare_training_flags, read_training_flags}; }

}  // namespace megacpp::settings
