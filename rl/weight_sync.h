// Note [Weight sync]
// After each training step the rollout's model must generate with the weights just trained.
// verl's hybrid engine (actor and rollout in the same processes, "colocated") syncs them so:
// each full tensor is gathered from the FSDP2 shards one parameter at a time and loaded into the
// rollout's copy of the model by name (vLLM's load_weights([(name, tensor)])), so no rank holds
// the trained model gathered whole beside its shard, only the rollout's copy and one gathered
// parameter. Beside tensor parallelism each parameter is gathered from its TP slices as well: the
// rollout's copy is whole (in ROLL's terms, vLLM at tensor_parallel_size 1 beside Megatron's TP).
// A LoRA actor's rollout has no adapters: each is merged into its weight on the way (PEFT's
// merge_and_unload, as verl loads a LoRA actor into vLLM).
// Names and shapes are checked for every parameter before anything is gathered, so a mismatched
// rollout model is refused with nothing half-copied.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

namespace at {
class Tensor;
}

namespace torch::nn {
class Module;
}

namespace megacpp::rl {

struct WeightSyncStats {
  int64_t tensors = 0;
  int64_t bytes = 0;               // of the full tensors loaded into the rollout model
  int64_t largest_gathered = 0;    // bytes of the largest tensor held gathered at once
  int64_t chunks = 0;              // broadcasts of the weights (separate ranks only)
  double seconds = 0;
};

// Throws std::invalid_argument naming the first parameter that `a` has and `b` lacks (or the other
// way round) or whose full shapes (sharded or not) differ; `a_name` and `b_name` say which model
// is which ("trained", "rollout").
void check_same_model(torch::nn::Module& a, const std::string& a_name, torch::nn::Module& b, const std::string& b_name);

// Calls `each(name, full)` for every parameter of `model` in order, `full` gathered from its FSDP2
// shards (collective over its shard group) and from its tensor-parallel slices (collective over
// its TP group), or the parameter itself when neither, one at a time; counts the tensors and the
// largest gathered in `stats`.
void for_each_full_parameter(torch::nn::Module& model, WeightSyncStats& stats,
                             const std::function<void(const std::string&, const at::Tensor&)>& each);

// A weight the rollout takes from the trainer: its name, full shape and the dtype it is gathered
// in (FSDP2's fp32 master, or the parameter's own).
struct RolloutWeight {
  std::string name;
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
};

// The weights a rollout model (without LoRA) takes from `trainer`, in the order
// for_each_rollout_weight yields them: every parameter but LoRA's adapters, each adapted Linear's
// weight after its adapters (which are merged into it).
std::vector<RolloutWeight> rollout_weights(torch::nn::Module& trainer);
// Calls `each(name, full)` for each of rollout_weights(trainer), in order: for_each_full_parameter's
// tensors, each adapted Linear's weight W with its adapter merged in, W + lora_B lora_A x alpha /
// rank (PEFT's merge_and_unload; verl syncs LoRA's actor to vLLM so). Collective as that.
void for_each_rollout_weight(torch::nn::Module& trainer, WeightSyncStats& stats,
                             const std::function<void(const std::string&, const at::Tensor&)>& each);

// Throws std::invalid_argument naming the first of `weights` (rollout_weights of a trainer, or a
// trainer's manifest) that `rollout` lacks or has in another shape, or a parameter of `rollout`
// that is not one of them.
void check_rollout_model(const std::vector<RolloutWeight>& weights, torch::nn::Module& rollout);

// Loads `trainer`'s full parameters (sharded by FSDP2 or not) into `rollout`'s (an unsharded
// model of the same family and shape, on any device, any floating dtype), by name; with LoRA, the
// adapters merged into their weights (for_each_rollout_weight). Collective
// over each sharded parameter's shard group: every rank of the trainer's mesh calls it. Throws
// std::invalid_argument naming the first parameter missing from either side or of another
// shape, before any is copied.
WeightSyncStats sync_colocated_weights(torch::nn::Module& trainer, torch::nn::Module& rollout);

}  // namespace megacpp::rl
