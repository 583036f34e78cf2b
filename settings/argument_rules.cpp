#include "settings/argument_rules.h"

#include <stdexcept>

#include "megacpp/checked_math.h"
#include "megacpp/errors.h"

namespace megacpp::settings {
namespace {

// Megatron's rules: iterations or samples, not both; the warmup given once.
void validate_schedule(const TrainingArguments& a) {
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

// Megatron's recompute: whole layers (full), uniformly (every layer) or the first N (block),
// or each layer's core attention only (selective, which takes no method).
void validate_recompute(const TrainingArguments& a) {
  if (a.recompute_granularity.empty()) {
    require(a.recompute_method.empty() && a.recompute_num_layers == 0,
            "--recompute-method and --recompute-num-layers need --recompute-granularity full");
    return;
  }
  require(a.use_torch_fsdp2, "--recompute-granularity needs --use-torch-fsdp2 (FSDP2Mixin applies the recompute)");
  require(a.recompute_granularity == "full" || a.recompute_granularity == "selective",
          "--recompute-granularity " + a.recompute_granularity + ": expected full or selective");
  if (a.recompute_granularity == "selective") {
    require(a.recompute_method.empty() && a.recompute_num_layers == 0,
            "--recompute-method and --recompute-num-layers are for --recompute-granularity full (selective "
            "recomputes every layer's core attention; Megatron refuses a method with it too)");
    return;
  }
  require(a.recompute_method == "uniform" || a.recompute_method == "block",
          "--recompute-granularity full needs --recompute-method uniform or block (got '" + a.recompute_method + "')");
  require(a.recompute_num_layers > 0, "--recompute-granularity full needs --recompute-num-layers >= 1");
}

// --profile: the iterations after start, up to and including end, on the ranks listed.
void validate_profile(const TrainingArguments& a) {
  if (!a.profile) return;
  require(a.profile_step_start >= 0, "--profile-step-start must be >= 0");
  require(a.profile_step_end > a.profile_step_start, "--profile-step-end must be > --profile-step-start (the iterations "
                                                     "after start, up to and including end, are traced)");
  for (int rank : a.profile_ranks) require(rank >= 0, "--profile-ranks must list ranks >= 0");
}

}  // namespace

void validate_arguments(const TrainingArguments& a) {
  require(a.seq_length > 0, "--seq-length must be positive");
  require(a.micro_batch_size > 0, "--micro-batch-size must be positive");
  // Each micro-batch is seq + 1 token ids of 8 bytes per sample.
  checked_product({{a.micro_batch_size, "--micro-batch-size"}, {checked_sum({{a.seq_length, "--seq-length"}, {1, "1"}}, "the sample length"), "(--seq-length + 1)"}, {8, "8 bytes"}},
                  "the bytes of a micro-batch");
  if (!a.rampup_batch_size.empty()) {
    require(a.rampup_batch_size.size() == 3 && a.rampup_batch_size[0] > 0 && a.rampup_batch_size[1] > 0 && a.rampup_batch_size[2] > 0,
            "--rampup-batch-size takes three positive integers: the start batch, the increment and the ramp-up samples");
    require(a.global_batch_size > 0, "--rampup-batch-size needs --global-batch-size (the batch it ramps up to)");
  }
  require(a.global_batch_size >= 0, "--global-batch-size must be >= 0 (0: micro batch x data-parallel size)");
  require(a.train_iters > 0, "--train-iters must be positive");
  require(a.lr >= 0, "--lr must be >= 0");
  require(a.min_lr >= 0 && a.min_lr <= a.lr, "--min-lr must be in [0, --lr]");
  require(a.lr_warmup_iters >= 0, "--lr-warmup-iters must be >= 0");
  require(a.lr_decay_iters >= 0, "--lr-decay-iters must be >= 0");
  validate_schedule(a);
  validate_recompute(a);
  validate_profile(a);
  require(a.empty_unused_memory_level >= 0 && a.empty_unused_memory_level <= 2, "--empty-unused-memory-level must be 0, 1 or 2");
  require(a.lr_decay_style == "constant" || a.lr_decay_style == "linear" || a.lr_decay_style == "cosine",
          "--lr-decay-style must be constant, linear or cosine (got '" + a.lr_decay_style + "')");
  require(a.weight_decay >= 0, "--weight-decay must be >= 0");
  require(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "--adam-beta1 must be in [0, 1)");
  require(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "--adam-beta2 must be in [0, 1)");
  require(a.adam_eps > 0, "--adam-eps must be positive");
  require(a.clip_grad >= 0, "--clip-grad must be >= 0");
  require(a.log_interval > 0, "--log-interval must be positive");
  require(a.distributed_timeout_minutes > 0, "--distributed-timeout-minutes must be positive");
  require(a.init_method_std > 0, "--init-method-std must be positive");
  require(a.mock_data != !a.data_path.empty(), a.mock_data ? "--mock-data and --data-path exclude each other"
                                                             : "no training data: pass --data-path PREFIX (or --mock-data)");
  require(a.make_vocab_size_divisible_by > 0, "--make-vocab-size-divisible-by must be positive");
  require(a.eval_interval > 0, "--eval-interval must be positive");
  require(a.eval_iters >= 0, "--eval-iters must be >= 0 (0: no validation)");
  require(a.dataloader_type == "single" || a.dataloader_type == "cyclic",
          "--dataloader-type " + a.dataloader_type + ": not supported (only single or cyclic; Megatron's external needs a "
          "Python data loader)");
  require(a.num_workers >= 0 && a.num_workers <= 64, "--num-workers must be in [0, 64]");
  require(a.exit_interval >= 0, "--exit-interval must be >= 0 (0: never)");
  require(a.exit_duration_in_mins >= 0, "--exit-duration-in-mins must be >= 0 (0: never)");
  require(a.peak_tflops >= 0, "--peak-tflops must be >= 0 (0: unknown)");
  require(a.tensorboard_log_interval > 0, "--tensorboard-log-interval must be positive");
  require(a.save_interval >= 0, "--save-interval must be >= 0 (0: only at the end of training)");
  require(a.save_interval == 0 || !a.save.empty(), "--save-interval needs --save");
  require(!a.async_save || !a.save.empty(), "--async-save needs --save");
  require(a.ckpt_step >= -1, "--ckpt-step must be an iteration number");
  require(a.ckpt_step < 0 || !a.load.empty() || !a.lora_load.empty(), "--ckpt-step needs --load or --lora-load");
  require(!a.finetune || !a.load.empty() || !a.lora_load.empty(), "--finetune needs --load or --lora-load");
  require(!a.exit_on_missing_checkpoint || !a.load.empty() || !a.lora_load.empty(),
          "--exit-on-missing-checkpoint needs --load or --lora-load");
  require(!a.use_checkpoint_args || !a.load.empty(), "--use-checkpoint-args needs --load");
  require(a.unexpected_keys == UnexpectedKeys::kRaise || a.finetune,
          "--dist-ckpt-strictness " + a.dist_ckpt_strictness +
              " needs --finetune: a resumed run loads exactly the model it saved");
  require(!a.no_initialization || !a.load.empty(), "--no-initialization needs --load (the weights would be uninitialized memory)");
  require(a.fsdp2_config_path.empty() || a.use_torch_fsdp2, "--fsdp2-config-path needs --use-torch-fsdp2");
  require(!a.init_model_with_meta_device || a.use_torch_fsdp2, "--init-model-with-meta-device needs --use-torch-fsdp2");
  require(!a.grad_reduce_in_bf16 || a.use_torch_fsdp2, "--grad-reduce-in-bf16 needs --use-torch-fsdp2 (FSDP2 reduces the gradients)");
  require(!(a.bf16 && a.fp16), "--bf16 and --fp16 exclude each other");
  require(a.loss_scale >= 0, "--loss-scale must be >= 0 (0: dynamic with --fp16)");
  require(a.initial_loss_scale > 0 && a.min_loss_scale > 0, "--initial-loss-scale and --min-loss-scale must be positive");
  require(a.loss_scale_window >= 1 && a.hysteresis >= 1, "--loss-scale-window and --hysteresis must be >= 1");
}


}  // namespace megacpp::settings
