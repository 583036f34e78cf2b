// What fsdp2_config.yaml says (MindSpeed's keys, or ROLL's strategy_config names), as
// FSDP2Mixin consumes it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

namespace megacpp::models {

struct FSDP2Config {
  int sharding_size = -1;                         // <= 1 or >= world: full sharding; else HSDP
  std::vector<std::string> sub_modules_to_wrap;   // module patterns sharded as their own group
  std::vector<std::string> ignored_modules;       // kept whole, gradients averaged like DDP
  std::vector<std::string> recompute_modules;     // activation recompute
  // Megatron's --recompute-granularity full: recompute every module of the model's module
  // classes (its layers) as well, and with recompute_num_layers > 0 only the first that many
  // of all recomputed modules, in forward order (--recompute-method block).
  bool recompute_default_module_classes = false;
  int64_t recompute_num_layers = 0;
  // Megatron's --recompute-granularity selective: recompute every layer's core attention (each
  // CoreAttention module, models/layers/core_attention.h) and keep the rest of the layer.
  bool recompute_core_attention = false;
  bool reshard_after_forward = true;
  // MindSpeed's offload_to_cpu / ROLL's offload_policy, with pin_memory: FSDP2's CPU offload
  // (parallel/fsdp/options.h); needs a CUDA device.
  bool offload_to_cpu = false;
  bool pin_memory = true;
  c10::optional<c10::ScalarType> param_dtype;
  c10::optional<c10::ScalarType> reduce_dtype;
  c10::optional<c10::ScalarType> output_dtype;
  bool cast_forward_inputs = true;
  // cast_forward_inputs per wrapped module class ({"CLIPEncoderLayer": false}): the YAML key's
  // mapping form. Over the model's own (FSDP2Mixin::cast_forward_inputs_by_class).
  std::map<std::string, bool> cast_forward_inputs_by_class;
  int num_to_forward_prefetch = 0;
  int num_to_backward_prefetch = 0;

  // Wrapping by what a module is rather than where (ROLL's wrap_policy). FSDP2Mixin::
  // resolve_module_classes turns these into sub_modules_to_wrap patterns with the model's
  // module_classes(), input_embeddings_path() and output_layer_path().
  std::vector<std::string> module_classes_to_wrap;  // class names, e.g. "LlamaDecoderLayer"
  bool wrap_default_module_classes = false;         // every class module_classes() lists
  bool wrap_embeddings = false;                     // the token embedding as its own group
  bool wrap_lm_output = false;                      // the output layer as its own group
  // ROLL's wrap_policy.moe_experts: expert classes (e.g. "Qwen3MoeMLP") whose every module is
  // its own group, with FSDP2Mixin::expert_module_classes().
  std::vector<std::string> expert_classes_to_wrap;
  // ROLL's apply_expert_patch: every expert runs on every rank each micro-batch (one no token
  // chose runs on an empty input), so experts may be wrapped one by one.
  bool apply_expert_patch = false;

  // ROLL's async_save_ckpt: checkpoints are written in the background, as --async-save.
  bool async_save_ckpt = false;

  // ROLL's ulysses_size (model_args or strategy_config; --context-parallel-size): each sequence
  // is split over this many consecutive ranks (Note [Ulysses] in parallel/ulysses.h).
  int ulysses_size = 1;
  // ROLL's apply_tiled_mlp and tiled_num_shards: every dense MLP runs over this many tiles of the
  // sequence, each recomputed (Note [Tiled forward] in parallel/tiled_forward.h).
  bool apply_tiled_mlp = false;
  int tiled_num_shards = 4;

  // ROLL's model_args.freeze_module_prefix (and --freeze-module-prefix): the parameters under
  // these module paths are frozen (models/freeze.h).
  std::vector<std::string> freeze_module_prefix;
};

inline bool operator==(const FSDP2Config& a, const FSDP2Config& b) {
  return a.sharding_size == b.sharding_size && a.sub_modules_to_wrap == b.sub_modules_to_wrap &&
         a.ignored_modules == b.ignored_modules && a.recompute_modules == b.recompute_modules &&
         a.recompute_default_module_classes == b.recompute_default_module_classes &&
         a.recompute_num_layers == b.recompute_num_layers && a.recompute_core_attention == b.recompute_core_attention &&
         a.reshard_after_forward == b.reshard_after_forward && a.param_dtype == b.param_dtype &&
         a.reduce_dtype == b.reduce_dtype && a.output_dtype == b.output_dtype &&
         a.cast_forward_inputs == b.cast_forward_inputs && a.cast_forward_inputs_by_class == b.cast_forward_inputs_by_class &&
         a.num_to_forward_prefetch == b.num_to_forward_prefetch &&
         a.num_to_backward_prefetch == b.num_to_backward_prefetch &&
         a.module_classes_to_wrap == b.module_classes_to_wrap &&
         a.wrap_default_module_classes == b.wrap_default_module_classes && a.wrap_embeddings == b.wrap_embeddings &&
         a.wrap_lm_output == b.wrap_lm_output && a.expert_classes_to_wrap == b.expert_classes_to_wrap &&
         a.apply_expert_patch == b.apply_expert_patch && a.async_save_ckpt == b.async_save_ckpt &&
         a.ulysses_size == b.ulysses_size && a.apply_tiled_mlp == b.apply_tiled_mlp &&
         a.tiled_num_shards == b.tiled_num_shards && a.offload_to_cpu == b.offload_to_cpu && a.pin_memory == b.pin_memory &&
         a.freeze_module_prefix == b.freeze_module_prefix;
}
inline bool operator!=(const FSDP2Config& a, const FSDP2Config& b) { return !(a == b); }

}  // namespace megacpp::models
