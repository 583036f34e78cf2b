// FSDP2Mixin: how a model is sharded (modelled on MindSpeed-MM's mixin). fully_shard runs
// fixed, logged passes: pre-shard setup -> _fully_shard (recompute, wrap groups in post-order,
// root) -> prefetch lists -> post-shard (initialize weights allocated from the meta device).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include "models/fsdp2_config.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/options.h"
#include "parallel/module.h"

namespace megacpp::models {

struct ShardingPlan {
  const parallel::DeviceMesh* mesh = nullptr;
  parallel::fsdp::FullyShardOptions options;   // for every fully_shard call
  std::vector<std::string> wrap_paths;         // post-order
  std::vector<std::string> recompute_paths;
  // Wrapped modules whose cast_forward_inputs is not options' (by their class).
  std::map<std::string, bool> cast_forward_inputs_at;
};

class FSDP2Mixin {
 public:
  virtual ~FSDP2Mixin() = default;

  // Shards this model over `mesh` as `config` says, allocating only local shards (also for a
  // model built on the meta device). `post_shard_init`, when given (meta-device init),
  // initializes the weights once the shards exist.
  void fully_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& config, c10::Device device,
                   const std::function<void()>& post_shard_init = nullptr);

  // Paths of the modules wrapped as their own group, in post-order (children before parents; for
  // a stack of layers, forward order), after fully_shard.
  const std::vector<std::string>& wrapped_module_paths() const { return plan_.wrap_paths; }

  // `config` with its by-class wrapping (module_classes_to_wrap, wrap_default_module_classes,
  // wrap_embeddings, wrap_lm_output) turned into sub_modules_to_wrap patterns, those fields
  // cleared. fully_shard applies it first. Throws std::invalid_argument for a class this model
  // does not list (naming the ones it does) or a part it does not have.
  FSDP2Config resolve_module_classes(const FSDP2Config& config) const;

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
  // Path of the token embedding module; empty when the model has none.
  virtual std::string input_embeddings_path() const { return ""; }
  // Path of the output layer module; empty when the model has none of its own (e.g. its weight
  // is tied to the token embedding).
  virtual std::string output_layer_path() const { return ""; }

 protected:
  // Applies recompute, then fully_shard on every wrapped module (post-order) and the root.
  // Models override it to change how they are wrapped.
  virtual void _fully_shard(const ShardingPlan& plan);

  parallel::Module& self_module();
  parallel::Module& module_at(const std::string& path);

 private:
  ShardingPlan pre_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& config, c10::Device device);
  // Experts wrapped one by one need apply_expert_patch (refused without it, naming the expert);
  // with it, every mixture-of-experts block runs all its experts.
  void apply_expert_patch(const FSDP2Config& config, const std::vector<std::string>& wrap_paths);
  void set_prefetch(const FSDP2Config& config);
  std::map<std::string, bool> cast_forward_inputs_at(const FSDP2Config& config, const std::vector<std::string>& wrap_paths);

  ShardingPlan plan_;
};

}  // namespace megacpp::models
