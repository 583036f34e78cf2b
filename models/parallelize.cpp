#include "models/parallelize.h"

#include <algorithm>
#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "models/freeze.h"
#include "models/layers/moe.h"
#include "models/long_context.h"
#include "models/module_path.h"
#include "models/sharding_plan.h"
#include "models/tensor_parallel.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/recompute.h"

namespace megacpp::models {
namespace {

bool lora(Parallelization& p) {
  if (p.settings.lora.rank <= 0) return false;
  apply_lora(p.model, p.settings.lora);
  return true;
}

bool freeze(Parallelization& p) {
  if (p.settings.freeze_module_prefix.empty()) return false;
  freeze_module_prefixes(p.model, p.settings.freeze_module_prefix);
  return true;
}

bool ulysses(Parallelization& p) {
  if (p.mesh.cp().size() <= 1) return false;
  apply_ulysses(p.model, p.mesh.cp(), p.settings.cp_setting);
  return true;
}

bool tensor_parallel(Parallelization& p) {
  if (p.mesh.tp().size() <= 1) return false;
  apply_tensor_parallel(p.model, p.mesh.tp(), p.settings.tensor_parallel_setting, p.settings.sequence_parallel);
  return true;
}

bool tiled_mlp(Parallelization& p) {
  if (!p.settings.tiled_mlp.apply_tiled_mlp) return false;
  apply_tiled_mlp(p.model, p.settings.tiled_mlp.tiled_num_shards, "apply_tiled_mlp");
  return true;
}

bool holds_meta_weights(LanguageModel& model) {
  for (const auto& parameter : model.parameters()) {
    if (parameter.is_meta()) return true;
  }
  return false;
}

bool initialize_full(Parallelization& p) {
  if (!p.settings.initialize || p.meta_weights) return false;
  p.settings.initialize();
  return true;
}

bool sharding_plan(Parallelization& p) {
  if (!p.settings.shard) return false;
  const ShardingPolicy& sharding = p.settings.sharding;
  if (sharding.num_to_forward_prefetch < 0 || sharding.num_to_backward_prefetch < 0) {
    throw std::invalid_argument("num_to_forward_prefetch / num_to_backward_prefetch must be >= 0");
  }
  p.plan = make_sharding_plan(p.model, p.mesh, p.model.resolve_module_classes(p.settings.wrap),
                              p.model.resolve_module_classes(p.settings.recompute), sharding, p.settings.device);
  return true;
}

bool recompute(Parallelization& p) {
  if (!p.settings.shard || p.plan.recompute_paths.empty()) return false;
  for (auto& path : p.plan.recompute_paths) parallel::enable_recompute(p.module(path));
  spdlog::info("fsdp2: recompute on {}", fmt::join(p.plan.recompute_paths, ", "));
  return true;
}

// Experts wrapped one by one need apply_expert_patch (refused without it, naming the expert);
// with it, every mixture-of-experts block runs all its experts.
bool expert_patch(Parallelization& p) {
  if (!p.settings.shard) return false;
  std::vector<std::pair<std::string, SparseMoeBlock*>> blocks;
  for (auto& [path, module] : parallel::named_hookable_modules(p.model)) {
    if (auto* block = dynamic_cast<SparseMoeBlock*>(module)) blocks.emplace_back(path, block);
  }
  if (p.settings.wrap.apply_expert_patch) {
    if (blocks.empty()) throw std::invalid_argument("apply_expert_patch: this model has no mixture-of-experts layers");
    for (auto& entry : blocks) entry.second->set_run_every_expert(true);
    spdlog::info("fsdp2: apply_expert_patch: every expert of {} MoE layer(s) runs each micro-batch", blocks.size());
    return true;
  }
  // An expert runs only where some token chose it: wrapped alone, its gathers and reduce-scatters
  // would not line up across ranks, and the ranks would wait for each other forever.
  for (auto& path : p.plan.wrap_paths) {
    for (auto& entry : blocks) {
      const std::string experts = entry.first + ".experts.";
      if (path.compare(0, experts.size(), experts) != 0) continue;
      throw std::invalid_argument(
          "'" + path + "' is an expert wrapped as its own group (sub_modules_to_wrap or wrap_policy.moe_experts): set "
          "apply_expert_patch: true in the fsdp2 config, so that every rank runs every expert each micro-batch (a rank "
          "that routed no token to it would skip its collectives), or wrap whole layers");
    }
  }
  return false;
}

bool fully_shard(Parallelization& p) {
  if (!p.settings.shard) return false;
  // output_dtype is for the model's caller: inner groups hand param_dtype activations to the
  // next layer (as torchtitan does), only the root casts its output.
  parallel::fsdp::FullyShardOptions inner = p.plan.options;
  inner.mixed_precision.output_dtype = c10::nullopt;
  for (auto& path : p.plan.wrap_paths) {
    parallel::fsdp::FullyShardOptions options = inner;
    if (auto it = p.plan.cast_forward_inputs_at.find(path); it != p.plan.cast_forward_inputs_at.end()) {
      options.mixed_precision.cast_forward_inputs = it->second;
    }
    parallel::fsdp::fully_shard(p.module(path), p.mesh, options);
  }
  parallel::fsdp::fully_shard(p.model, p.mesh, p.plan.options);
  spdlog::info("fsdp2: sharded {} group(s) + root", p.plan.wrap_paths.size());
  return true;
}

bool prefetch(Parallelization& p) {
  const int forward_count = p.settings.sharding.num_to_forward_prefetch;
  const int backward_count = p.settings.sharding.num_to_backward_prefetch;
  if (!p.settings.shard || (forward_count == 0 && backward_count == 0)) return false;
  // Groups start their forward in pre-order (a layer, then the experts wrapped inside it) and
  // their backward in reverse post-order (the plan's wrap_paths reversed).
  std::vector<std::string> pre_order;
  for (auto& item : p.model.named_modules("", /*include_self=*/false)) pre_order.push_back(item.key());
  const std::vector<std::string> forward_order = in_order_of(pre_order, p.plan.wrap_paths);
  const auto& post = p.plan.wrap_paths;
  const int n = static_cast<int>(post.size());
  for (int i = 0; i < n; ++i) {
    std::vector<parallel::Module*> forward, backward;
    for (int k = 1; k <= forward_count && i + k < n; ++k) forward.push_back(&p.module(forward_order[i + k]));
    for (int k = 1; k <= backward_count && i - k >= 0; ++k) backward.push_back(&p.module(post[i - k]));
    if (!forward.empty()) parallel::fsdp::set_modules_to_forward_prefetch(p.module(forward_order[i]), forward);
    if (!backward.empty()) parallel::fsdp::set_modules_to_backward_prefetch(p.module(post[i]), backward);
  }
  spdlog::info("fsdp2: prefetch forward {} / backward {} group(s) ahead", forward_count, backward_count);
  return true;
}

bool initialize_shards(Parallelization& p) {
  if (!p.settings.initialize || !p.meta_weights) return false;
  if (!p.settings.shard) {
    throw std::invalid_argument("the model was built on the meta device but is not sharded, so its weights have no "
                                "memory to initialize: --init-model-with-meta-device needs --use-torch-fsdp2");
  }
  p.settings.initialize();
  spdlog::info("fsdp2: initialized weights after sharding");
  return true;
}

}  // namespace

parallel::Module& Parallelization::module(const std::string& path) {
  if (path.empty()) return model;
  for (auto& [found, module] : parallel::named_hookable_modules(model)) {
    if (found == path) return *module;
  }
  throw std::invalid_argument("module '" + path + "' is not a megacpp parallel::Module and cannot be wrapped");
}

void insert_pass_before(std::vector<ParallelizePass>& passes, const std::string& before, ParallelizePass pass) {
  auto at = std::find_if(passes.begin(), passes.end(), [&](const ParallelizePass& p) { return p.name == before; });
  if (at == passes.end()) throw std::logic_error("insert_pass_before: no pass named '" + before + "'");
  passes.insert(at, std::move(pass));
}

std::vector<ParallelizePass> default_passes() {
  return {{"lora", lora},           {"freeze", freeze},
          {"ulysses", ulysses},     {"tensor_parallel", tensor_parallel},
          {"tiled_mlp", tiled_mlp},
          {"initialize_full", initialize_full},
          {"sharding_plan", sharding_plan},
          {"recompute", recompute}, {"expert_patch", expert_patch},
          {"fully_shard", fully_shard},
          {"prefetch", prefetch},   {"initialize_shards", initialize_shards}};
}

ShardingPlan parallelize(LanguageModel& model, const parallel::DeviceMesh& mesh, const ParallelizeSettings& settings) {
  Parallelization state{model, mesh, settings, {}, holds_meta_weights(model)};
  std::vector<std::string> applied;
  for (const auto& pass : model.parallelize_passes(default_passes())) {
    if (pass.run(state)) applied.push_back(pass.name);
  }
  spdlog::info("parallelize: {}", applied.empty() ? std::string("nothing to do") : fmt::format("{}", fmt::join(applied, " -> ")));
  return state.plan;
}

}  // namespace megacpp::models
