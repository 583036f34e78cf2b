// FSDP2Mixin: what a model says about how it may be sharded (modelled on MindSpeed-MM's mixin):
// its module classes, experts, token embedding and output layer, whether it runs on slices of
// each sequence, and the passes that parallelize runs on it (Note [Parallelize] in
// models/parallelize.h), which a family may change.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/sharding_policy.h"
#include "models/parallelize_pass.h"

namespace megacpp::models {

// One entry of a family's tensor-parallel plan (torchtitan's parallelize_plan, Megatron's
// ColumnParallelLinear / RowParallelLinear): the models::Linear layers whose paths `pattern`
// matches (models/module_path.h, e.g. "h.{*}.attn.c_attn"), split column-parallel (by output
// rows; in `parts` equal parts each split, a fused [q; k; v] projection's 3; the gradient of the
// layer's input summed over the TP group) or row-parallel (by input columns; the outputs summed,
// the bias added once). Each layer holds `units` whole units (attention heads, FFN columns),
// `unit_name` naming them in a refusal, which the TP size must divide.
struct TensorParallelLinear {
  std::string pattern;
  bool column = true;
  int64_t parts = 1;
  int64_t units = 0;
  std::string unit_name;
};

// Where --sequence-parallel splits each sequence between the TP ranks (Note [Sequence
// parallelism] in parallel/sequence_parallel.h): after the modules `sliced_after`, whose
// [batch, seq, hidden] outputs summed are the first block's input (the token embedding, whose
// vocabulary-parallel sums are reduce-scattered along the sequence; a learned position
// embedding, its output sliced), and whole again after `gathered_after` (the final norm, whose
// output the output layer reads). Those modules and the output layer read whole sequences;
// every other replicated parameter is read on slices.
struct SequenceParallelRegion {
  std::vector<std::string> sliced_after;
  std::string gathered_after;
};

class FSDP2Mixin {
 public:
  virtual ~FSDP2Mixin() = default;

  // `wrap` with its by-class wrapping (module_classes_to_wrap, wrap_default_module_classes,
  // wrap_embeddings, wrap_lm_output, expert_classes_to_wrap) and MindSpeed's class paths turned
  // into sub_modules_to_wrap / ignored_modules patterns, those fields cleared; `recompute` with
  // its class paths and recompute_default_module_classes turned into recompute_modules patterns.
  // parallelize's sharding_plan pass applies both. Throws std::invalid_argument for a class
  // this model does not list (naming the ones it does) or a part it does not have.
  WrapPolicy resolve_module_classes(const WrapPolicy& wrap) const;
  RecomputePolicy resolve_module_classes(const RecomputePolicy& recompute) const;

  // How this model's modules are named by class, for wrapping by class name (as ROLL's
  // wrap_policy does with Hugging Face classes): pairs (class name, module pattern), e.g.
  // {"LlamaDecoderLayer", "layers.{*}"}. A class may appear with several patterns. Every
  // listed class is wrapped when wrap_default_module_classes is set (Hugging Face's
  // _no_split_modules). Default: none.
  virtual std::vector<std::pair<std::string, std::string>> module_classes() const { return {}; }
  // How this model's mixture-of-experts experts are named by class, for ROLL's
  // wrap_policy.moe_experts: pairs (class name, pattern of every expert), e.g. {"Qwen3MoeMLP",
  // "layers.{*}.mlp.experts.{*}"}. Kept apart from module_classes(): experts are wrapped only
  // when asked. Default: none.
  virtual std::vector<std::pair<std::string, std::string>> expert_module_classes() const { return {}; }
  // The cast_forward_inputs of the wrapped modules of a class, unless fsdp2_config.yaml names the
  // class (LLaVA: CLIPEncoderLayer false, ROLL's choice for a vision tower). Default: none, every
  // module takes the config's.
  virtual std::map<std::string, bool> cast_forward_inputs_by_class() const { return {}; }
  // Why this model cannot run with Ulysses sequence parallelism (Note [Ulysses] in
  // parallel/ulysses.h), or "" when it can: its input may then be a contiguous slice of each
  // sequence, positions entering only through the rotary embeddings of its models::Attention
  // layers, which apply_ulysses (models/long_context.h) splits by heads. Default: a refusal.
  virtual std::string ulysses_refusal() const {
    return "it does not say that it runs on slices of each sequence (FSDP2Mixin::ulysses_refusal)";
  }
  // Why this model cannot split its layers over tensor-parallel ranks (Note [Tensor parallelism]
  // in parallel/tensor_parallel.h), or "" when it can: its transformer layers are then
  // models::Attention and models::SwiGLUMLP, which apply_tensor_parallel (models/tensor_parallel.h)
  // splits as Megatron does, and nothing else reads their projections' outputs. Default: a refusal.
  virtual std::string tensor_parallel_refusal() const {
    return "it does not say that its layers split over tensor-parallel ranks (FSDP2Mixin::tensor_parallel_refusal)";
  }
  // A model whose layers are not models::Attention and models::SwiGLUMLP says how its Linear
  // layers split instead (its attention then reads its head count from its projections'
  // outputs). Empty: those layers are found by type.
  virtual std::vector<TensorParallelLinear> tensor_parallel_plan() const { return {}; }
  // Where sequence parallelism beside TP splits each sequence. Tensor parallelism needs
  // `gathered_after` also without sequence parallelism: the vocabulary-parallel output layer's
  // input gradient is summed there (Note [Vocabulary parallelism] in parallel/vocab_parallel.h).
  // Default: none (refused).
  virtual SequenceParallelRegion sequence_parallel_region() const { return {}; }
  // Path of the token embedding module; empty when the model has none.
  virtual std::string input_embeddings_path() const { return ""; }
  // Path of the output layer module; empty when the model has none of its own (e.g. its weight
  // is tied to the token embedding).
  virtual std::string output_layer_path() const { return ""; }

  // The passes parallelize runs on this model: `passes` (default_passes()) as they are, by
  // default. A family may add its own (insert_pass_before, e.g. a check of the sharding plan
  // before fully_shard), replace one by name or drop one, as torchtitan's parallelize_fn does.
  virtual std::vector<ParallelizePass> parallelize_passes(std::vector<ParallelizePass> passes) const { return passes; }
};

}  // namespace megacpp::models
