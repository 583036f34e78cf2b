// What megacpp-train's flags say, once parsed and checked (settings/arguments.h parses them,
// settings/argument_rules.h holds the rules they keep together).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_format.h"
#include "io/data/tokenizer/tokenizer.h"
#include "models/lora.h"
#include "models/model_family.h"

namespace megacpp::settings {

// Megatron's --dist-ckpt-strictness for tensors of a --load checkpoint the model does not have:
// "raise_unexpected" / "raise_all" -> kRaise, "log_unexpected" / "log_all" -> kLog,
// "assume_ok_unexpected" / "ignore_all" -> kIgnore.
enum class UnexpectedKeys { kRaise, kLog, kIgnore };

struct TrainingArguments {
  // model
  std::string model_type = "llama";
  std::vector<std::string> model_libraries;  // --model-library, loaded before the flags are read
  std::map<std::string, std::string> flag_values;  // every flag's value, given or default (the log's arguments block)
  std::vector<std::string> notes;  // said once in the log (Note [Megatron flags] in settings/megatron_flags.h)
  // The model's shape, from the flags of its family (--model-type); built by parse_arguments.
  std::shared_ptr<const models::ModelConfig> model;
  int64_t seq_length = 128;
  double init_method_std = 0.02;
  models::LoraSettings lora;  // --lora-rank > 0: LoRA adapters trained, the rest frozen
  std::vector<std::string> freeze_module_prefix;  // --freeze-module-prefix (models/freeze.h)
  // batch and schedule
  int64_t micro_batch_size = 1;
  int64_t global_batch_size = 0;  // 0: micro batch x data-parallel size
  std::vector<int64_t> rampup_batch_size;  // Megatron's START INCREMENT SAMPLES; empty: none
  int64_t train_iters = 10;
  double lr = 1e-4;
  double min_lr = 0.0;
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;  // 0: train_iters
  // Megatron's sample-based schedule (training/optim/lr_schedule.h): with
  // train_samples > 0, train_iters is the whole global batches in it (set once the global batch
  // is known).
  int64_t train_samples = 0;
  int64_t lr_warmup_samples = 0;
  int64_t lr_decay_samples = 0;
  double lr_warmup_fraction = -1;  // < 0: not given
  double lr_warmup_init = 0;
  std::string lr_decay_style = "cosine";
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;
  // Megatron's decoupled learning rate of the input and output layers (the token embedding and
  // the output layer): the same schedule between these bounds. < 0: not given (--lr, --min-lr).
  double decoupled_lr = -1;
  double decoupled_min_lr = -1;
  bool check_for_nan_in_loss_and_grad = true;  // off with --no-check-for-nan-in-loss-and-grad
  int64_t loss_chunk_size = 0;  // --loss-chunk-size with --loss-compute-mode chunk; 0: default mode
  bool calculate_per_token_loss = false;  // --calculate-per-token-loss: the global batch's labels weigh alike
  // Note [Fused kernels] in models/kernels/fusion.h: off with --no-kernel-fusion (all), or
  // Megatron's --no-rope-fusion and --no-bias-swiglu-fusion (one each).
  bool kernel_fusion = true;
  bool rope_fusion = true;
  bool swiglu_fusion = true;
  // data
  bool mock_data = false;
  bool is_instruction_dataset = false;  // --is-instruction-dataset: --data-path holds conversations
  bool variable_seq_lengths = false;    // --variable-seq-lengths: micro-batches cut to their longest sample
  bool padded_samples = false;          // --padded-samples: each pass over instruction data whole global batches
  // Note [Packed documents] in models/language_model.h
  bool reset_position_ids = false;    // --reset-position-ids: each document's positions from 0
  bool reset_attention_mask = false;  // --reset-attention-mask: attention within each document
  bool eod_mask_loss = false;         // --eod-mask-loss: no loss on predicting the token after an end of document
  std::vector<std::string> data_path;  // "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ...", or one image-text FILE.jsonl
  std::array<double, 3> image_mean{}, image_std{};  // --image-mean / --image-std (image-text data)
  std::string split = "969,30,1";
  io::data::TokenizerOptions tokenizer;
  int64_t make_vocab_size_divisible_by = 128;
  int64_t tokenizer_vocab_size = 0;  // set by parse_arguments; the model's is this, padded
  int64_t tokenizer_eod = -1;        // set by parse_arguments: the tokenizer's end-of-document id
  uint64_t seed = 1234;
  // evaluation and stopping
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  int64_t exit_interval = 0;  // 0: never
  std::string dataloader_type = "single";  // or cyclic (training/data/cyclic_samples.h)
  int num_workers = 2;  // threads reading the next iteration's micro-batches (Megatron's default 2)
  std::string data_cache_path;  // where the GPT datasets' sample indices are kept between runs
  double exit_duration_in_mins = 0;  // 0: never (Megatron takes whole minutes; fractions work too)
  // precision and parallelism
  bool bf16 = false;
  bool fp16 = false;  // FSDP2 param_dtype fp16 with a loss scaler (training/optim/loss_scaler.h)
  double loss_scale = 0;  // > 0: a constant scale (also with --bf16); 0: dynamic with --fp16
  double initial_loss_scale = 4294967296.0;  // 2^32, Megatron's
  double min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool grad_reduce_in_bf16 = false;  // FSDP2 reduce_dtype bf16
  bool use_torch_fsdp2 = false;
  std::string fsdp2_config_path;
  bool init_model_with_meta_device = false;
  double distributed_timeout_minutes = 10;  // fractions too (0.5: 30 s); settings::distributed_timeout
  // Megatron's --context-parallel-size with MindSpeed's --context-parallel-algo: megacpp's
  // context parallelism is Ulysses (ulysses_cp_algo; fsdp2_config.yaml's ulysses_size).
  int context_parallel_size = 1;
  // Megatron's --tensor-model-parallel-size: each layer's weights split over that many
  // consecutive ranks (Note [Tensor parallelism] in parallel/tensor_parallel.h), beside FSDP2.
  int tensor_model_parallel_size = 1;
  // Megatron's --sequence-parallel with a TP size above 1 (Note [Sequence parallelism]).
  bool sequence_parallel = false;
  std::string context_parallel_algo = "ulysses_cp_algo";
  // Megatron's activation recompute of whole layers (mapped onto fsdp2_config.yaml's
  // recompute_modules by settings/fsdp2_config_from_args.h).
  std::string recompute_granularity;  // "" or full ("selective" is refused)
  std::string recompute_method;       // uniform or block, with full
  int64_t recompute_num_layers = 0;
  int empty_unused_memory_level = 0;  // 1, 2: return the device's cached blocks after each iteration
  // logging and outputs
  int64_t log_interval = 100;
  double peak_tflops = 0;  // per device; 0: unknown, no MFU
  std::string tensorboard_dir;
  int64_t tensorboard_log_interval = 1;
  std::string dump_final_params;
  // --profile: libtorch's profiler over iterations profile_step_start + 1 to profile_step_end
  // (as Megatron), on the ranks listed, a Chrome trace per rank in profile_dir.
  bool profile = false;
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<int> profile_ranks = {0};
  std::string profile_dir;
  // checkpoints
  std::string save;
  int64_t save_interval = 0;  // 0: only at the end of training
  std::string load;
  // --init-from-hf-path (MindSpeed-LLM's): a Hugging Face folder whose config.json is the model
  // and whose weights start it when --load holds no checkpoint (Note [Hugging Face folders]).
  std::string init_from_hf_path;
  std::string lora_load;  // --lora-load: the adapters' checkpoint root (--load then gives the base)
  bool lora_save_base = false;  // --lora-save-base: --save writes the frozen base weights too
  int64_t ckpt_step = -1;     // -1: the latest
  checkpoint::CheckpointFormat ckpt_format;  // --ckpt-format, torch_dist by default
  bool no_save_optim = false;
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool no_save_rng = false;
  bool exit_on_missing_checkpoint = false;  // else a --load without a checkpoint trains from scratch
  bool use_checkpoint_args = false;  // the model is the --load checkpoint's (its args)
  bool finetune = false;
  // Tensors in a --load checkpoint that the model does not have: raise (megacpp's default),
  // log or ignore; the latter two only with --finetune. The flag as given (for the log), and
  // what it means.
  std::string dist_ckpt_strictness = "raise_unexpected";
  UnexpectedKeys unexpected_keys = UnexpectedKeys::kRaise;
  bool async_save = false;
  bool no_initialization = false;
};

}  // namespace megacpp::settings
