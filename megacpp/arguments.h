// megacpp-train's command line: Megatron-style flags parsed into one validated struct.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_format.h"
#include "megacpp/data/tokenizer/tokenizer.h"
#include "models/model_family.h"

namespace megacpp {

struct TrainingArguments {
  // model
  std::string model_type = "llama";
  std::vector<std::string> model_libraries;  // --model-library, loaded before the flags are read
  std::map<std::string, std::string> flag_values;  // every flag's value, given or default (the log's arguments block)
  std::vector<std::string> notes;  // said once in the log (Note [Megatron flags] in megacpp/megatron_flags.h)
  // The model's shape, from the flags of its family (--model-type); built by parse_arguments.
  std::shared_ptr<const models::ModelConfig> model;
  int64_t seq_length = 128;
  double init_method_std = 0.02;
  // batch and schedule
  int64_t micro_batch_size = 1;
  int64_t global_batch_size = 0;  // 0: micro batch x data-parallel size
  int64_t train_iters = 10;
  double lr = 1e-4;
  double min_lr = 0.0;
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;  // 0: train_iters
  // Megatron's sample-based schedule (megacpp/training/lr_schedule.h): with
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
  bool check_for_nan_in_loss_and_grad = true;  // off with --no-check-for-nan-in-loss-and-grad
  // data
  bool mock_data = false;
  std::vector<std::string> data_path;  // "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..."
  std::string split = "969,30,1";
  data::TokenizerOptions tokenizer;
  int64_t make_vocab_size_divisible_by = 128;
  int64_t tokenizer_vocab_size = 0;  // set by parse_arguments; the model's is this, padded
  uint64_t seed = 1234;
  // evaluation and stopping
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  int64_t exit_interval = 0;  // 0: never
  double exit_duration_in_mins = 0;  // 0: never (Megatron takes whole minutes; fractions work too)
  // precision and parallelism
  bool bf16 = false;
  bool use_torch_fsdp2 = false;
  std::string fsdp2_config_path;
  bool init_model_with_meta_device = false;
  int distributed_timeout_minutes = 10;
  // logging and outputs
  int64_t log_interval = 100;
  double peak_tflops = 0;  // per device; 0: unknown, no MFU
  std::string tensorboard_dir;
  int64_t tensorboard_log_interval = 1;
  std::string dump_final_params;
  // checkpoints
  std::string save;
  int64_t save_interval = 0;  // 0: only at the end of training
  std::string load;
  int64_t ckpt_step = -1;     // -1: the latest
  checkpoint::CheckpointFormat ckpt_format;  // --ckpt-format, torch_dist by default
  bool no_save_optim = false;
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool no_save_rng = false;
  bool finetune = false;
  // Tensors in a --load checkpoint that the model does not have: raise (megacpp's default),
  // log or ignore; the latter two only with --finetune.
  std::string dist_ckpt_strictness = "raise_unexpected";
  bool async_save = false;
  bool no_initialization = false;
};

// Parses argv (argv[0] is the program). Libraries named by --model-library are loaded first,
// so the families they register add their flags. The tokenizer is built once to size the model's
// vocabulary (Megatron's padded vocab), so a bad tokenizer file is reported here. Throws std::invalid_argument naming the flag for an
// unknown flag, a malformed value or an inconsistent combination. `help` is set and usage
// printed to stdout for --help.
TrainingArguments parse_arguments(int argc, const char* const* argv, bool* help = nullptr);

// Checks that need the world size: the batch arithmetic. Returns the number of micro-batches
// accumulated per iteration.
int64_t gradient_accumulation_steps(const TrainingArguments& args, int data_parallel_size);

}  // namespace megacpp
