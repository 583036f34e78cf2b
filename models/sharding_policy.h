// What parallelize (Note [Parallelize]) is told about sharding a model, by section: what becomes
// a group (WrapPolicy), what is recomputed (RecomputePolicy), how each group is sharded and
// computed (ShardingPolicy) and how dense MLPs are tiled (TiledMlpPolicy). Each field is named
// as its key in fsdp2_config.yaml (MindSpeed's, or ROLL's where MindSpeed has none);
// settings/fsdp2_config reads them, with the flags that set them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

namespace megacpp::models {

// Gives a section operator== and != from its fields() (the one list of its fields).
template <class Section>
struct ComparedByFields {
  friend bool operator==(const Section& a, const Section& b) { return a.fields() == b.fields(); }
  friend bool operator!=(const Section& a, const Section& b) { return !(a == b); }
};

struct WrapPolicy : ComparedByFields<WrapPolicy> {
  std::vector<std::string> sub_modules_to_wrap;   // module patterns sharded as their own group
  std::vector<std::string> ignored_modules;       // kept whole, gradients averaged like DDP
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

  auto fields() const {
    return std::tie(sub_modules_to_wrap, ignored_modules, module_classes_to_wrap, wrap_default_module_classes,
                    wrap_embeddings, wrap_lm_output, expert_classes_to_wrap, apply_expert_patch);
  }
};

struct RecomputePolicy : ComparedByFields<RecomputePolicy> {
  std::vector<std::string> recompute_modules;  // module patterns (or MindSpeed's class paths)
  // Megatron's --recompute-granularity full: recompute every module of the model's module
  // classes (its layers) as well, and with recompute_num_layers > 0 only the first that many
  // of all recomputed modules, in forward order (--recompute-method block).
  bool recompute_default_module_classes = false;
  int64_t recompute_num_layers = 0;
  // Megatron's --recompute-granularity selective: recompute every layer's core attention (each
  // CoreAttention module, models/layers/core_attention.h) and keep the rest of the layer.
  bool recompute_core_attention = false;

  auto fields() const {
    return std::tie(recompute_modules, recompute_default_module_classes, recompute_num_layers, recompute_core_attention);
  }
};

// The options of every fully_shard call (parallel/fsdp/options.h) and the prefetch lists.
struct ShardingPolicy : ComparedByFields<ShardingPolicy> {
  bool reshard_after_forward = true;
  // MindSpeed's offload_to_cpu / ROLL's offload_policy, with pin_memory: FSDP2's CPU offload;
  // needs a CUDA device.
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

  auto fields() const {
    return std::tie(reshard_after_forward, offload_to_cpu, pin_memory, param_dtype, reduce_dtype, output_dtype,
                    cast_forward_inputs, cast_forward_inputs_by_class, num_to_forward_prefetch, num_to_backward_prefetch);
  }
};

// ROLL's apply_tiled_mlp and tiled_num_shards: every dense MLP runs over this many tiles of the
// sequence, each recomputed (Note [Tiled forward] in parallel/tiled_forward.h).
struct TiledMlpPolicy : ComparedByFields<TiledMlpPolicy> {
  bool apply_tiled_mlp = false;
  int tiled_num_shards = 4;

  auto fields() const { return std::tie(apply_tiled_mlp, tiled_num_shards); }
};

}  // namespace megacpp::models
