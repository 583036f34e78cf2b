#include "settings/fsdp2_config_from_args.h"

#include <algorithm>
#include <stdexcept>

#include "settings/fsdp2_config_yaml.h"
#include "settings/parallelism.h"

namespace megacpp::settings {
namespace {

// Megatron's --recompute-granularity full: every layer (uniform; Megatron checkpoints N layers
// at a time, megacpp each layer alone: the same computation) or the first N (block). The layers
// are the model's module classes (its decoder layers), resolved when it is sharded. selective:
// each layer's core attention only.
void apply_recompute_flags(const TrainingArguments& args, FSDP2Config& config) {
  if (args.recompute_granularity.empty()) return;
  if (!config.recompute.recompute_modules.empty()) {
    throw std::invalid_argument("--recompute-granularity and recompute_modules in " + args.fsdp2_config_path +
                                " both say what to recompute (remove one of them)");
  }
  if (args.recompute_granularity == "selective") {
    config.recompute.recompute_core_attention = true;
    return;
  }
  config.recompute.recompute_default_module_classes = true;
  config.recompute.recompute_num_layers = args.recompute_method == "block" ? args.recompute_num_layers : 0;
}

// --freeze-module-prefix adds to the YAML's model_args.freeze_module_prefix; --async-save turns
// on ROLL's async_save_ckpt.
FSDP2Config with_flags_added(FSDP2Config config, const TrainingArguments& args) {
  config.async_save_ckpt = config.async_save_ckpt || args.async_save;
  for (const auto& prefix : args.freeze_module_prefix) {
    if (std::find(config.freeze_module_prefix.begin(), config.freeze_module_prefix.end(), prefix) == config.freeze_module_prefix.end()) {
      config.freeze_module_prefix.push_back(prefix);
    }
  }
  return config;
}

}  // namespace

FSDP2Config fsdp2_config_from_args(const TrainingArguments& args) {
  FSDP2Config defaults;
  if (args.bf16) {
    defaults.sharding.param_dtype = c10::kBFloat16;
    defaults.sharding.reduce_dtype = c10::kFloat;
  }
  if (args.fp16) {
    defaults.sharding.param_dtype = c10::kHalf;
    defaults.sharding.reduce_dtype = c10::kFloat;
  }
  if (args.grad_reduce_in_bf16) defaults.sharding.reduce_dtype = c10::kBFloat16;
  defaults.ulysses_size = args.context_parallel_size;  // a YAML's ulysses_size must agree (check_context_parallel)
  if (args.fsdp2_config_path.empty()) {
    apply_recompute_flags(args, defaults);
    check_context_parallel(args, defaults);
    return with_flags_added(defaults, args);
  }
  FSDP2Config config = load_fsdp2_config(args.fsdp2_config_path, defaults);
  apply_recompute_flags(args, config);
  if (args.bf16 && config.sharding.param_dtype != c10::kBFloat16) {
    throw std::invalid_argument("--bf16 conflicts with param_dtype in " + args.fsdp2_config_path + " (remove one of them)");
  }
  if (args.fp16 && config.sharding.param_dtype != c10::kHalf) {
    throw std::invalid_argument("--fp16 conflicts with param_dtype in " + args.fsdp2_config_path + " (remove one of them)");
  }
  if (args.grad_reduce_in_bf16 && config.sharding.reduce_dtype != c10::kBFloat16) {
    throw std::invalid_argument("--grad-reduce-in-bf16 conflicts with reduce_dtype in " + args.fsdp2_config_path +
                                " (remove one of them)");
  }
  check_context_parallel(args, config);
  return with_flags_added(config, args);
}

}  // namespace megacpp::settings
