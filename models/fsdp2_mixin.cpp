#include "models/fsdp2_mixin.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "models/layers/core_attention.h"
#include "models/layers/moe.h"
#include "models/module_path.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/recompute.h"

namespace megacpp::models {
namespace {

void post_order(torch::nn::Module& module, const std::string& path, std::vector<std::string>& out) {
  for (auto& child : module.named_children()) {
    post_order(*child.value(), path.empty() ? child.key() : path + "." + child.key(), out);
  }
  out.push_back(path);
}

// `paths` restricted to those in `matched`, in the order of `order`.
std::vector<std::string> ordered(const std::vector<std::string>& order, const std::vector<std::string>& matched) {
  std::vector<std::string> out;
  for (auto& p : order) {
    if (std::find(matched.begin(), matched.end(), p) != matched.end()) out.push_back(p);
  }
  return out;
}

// MindSpeed names modules by class path in sub_modules_to_wrap, recompute_modules and
// ignored_modules (transformers.models.qwen3.modeling_qwen3.Qwen3DecoderLayer): an entry whose
// last segment is a class name (it starts with a capital; module paths do not) stands for the
// modules of that class.
std::vector<std::string> with_classes_resolved(const std::vector<std::string>& entries,
                                               const std::vector<std::pair<std::string, std::string>>& classes,
                                               const std::string& known_text, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& entry : entries) {
    const std::string last = entry.substr(entry.rfind('.') == std::string::npos ? 0 : entry.rfind('.') + 1);
    const bool is_class = entry.find('{') == std::string::npos && !last.empty() && std::isupper(static_cast<unsigned char>(last[0]));
    if (!is_class) {
      out.push_back(entry);
      continue;
    }
    bool found = false;
    for (const auto& [class_name, pattern] : classes) {
      if (class_name != last) continue;
      found = true;
      if (std::find(out.begin(), out.end(), pattern) == out.end()) out.push_back(pattern);
    }
    if (!found) throw std::invalid_argument(key + ": '" + entry + "' is not a module class of this model (known: " + known_text + ")");
  }
  return out;
}

// ROLL's wrap_policy.moe_experts: the patterns of the named expert classes, each of which must
// be one of the model's.
std::vector<std::string> expert_patterns(const std::vector<std::string>& names,
                                         const std::vector<std::pair<std::string, std::string>>& experts) {
  std::vector<std::string> patterns, known;
  for (auto& entry : experts) known.push_back(entry.first);
  for (auto& name : names) {
    const size_t before = patterns.size();
    for (auto& [class_name, pattern] : experts) {
      if (class_name == name) patterns.push_back(pattern);
    }
    if (patterns.size() > before) continue;
    throw std::invalid_argument("wrap_policy.moe_experts: '" + name + "' is not an expert class of this model (known: " +
                                (known.empty() ? std::string("none: it has no mixture-of-experts layers")
                                               : fmt::format("{}", fmt::join(known, ", "))) +
                                ")");
  }
  return patterns;
}

}  // namespace

FSDP2Config FSDP2Mixin::resolve_module_classes(const FSDP2Config& config) const {
  FSDP2Config out = config;
  out.module_classes_to_wrap.clear();
  out.wrap_default_module_classes = false;
  out.wrap_embeddings = false;
  out.wrap_lm_output = false;
  out.expert_classes_to_wrap.clear();
  auto add = [&out](const std::string& pattern) {
    auto& wrap = out.sub_modules_to_wrap;
    if (std::find(wrap.begin(), wrap.end(), pattern) == wrap.end()) wrap.push_back(pattern);
  };
  const auto classes = module_classes();
  std::vector<std::string> known;
  for (auto& entry : classes) {
    if (std::find(known.begin(), known.end(), entry.first) == known.end()) known.push_back(entry.first);
  }
  const std::string known_text = known.empty() ? std::string("none; name modules with sub_modules_to_wrap")
                                               : fmt::format("{}", fmt::join(known, ", "));
  out.sub_modules_to_wrap = with_classes_resolved(config.sub_modules_to_wrap, classes, known_text, "sub_modules_to_wrap");
  out.recompute_modules = with_classes_resolved(config.recompute_modules, classes, known_text, "recompute_modules");
  out.ignored_modules = with_classes_resolved(config.ignored_modules, classes, known_text, "ignored_modules");
  if (config.recompute_default_module_classes) {
    if (classes.empty()) {
      throw std::invalid_argument("--recompute-granularity full: this model lists no module classes (layers) to "
                                  "recompute; name the modules with recompute_modules in fsdp2_config.yaml");
    }
    for (const auto& entry : classes) {
      auto& recompute = out.recompute_modules;
      if (std::find(recompute.begin(), recompute.end(), entry.second) == recompute.end()) recompute.push_back(entry.second);
    }
    out.recompute_default_module_classes = false;
  }

  if (config.wrap_embeddings) {
    const std::string path = input_embeddings_path();
    if (path.empty()) throw std::invalid_argument("wrap_embeddings: this model has no token embedding module to wrap");
    add(path);
  }
  std::vector<std::string> names = config.module_classes_to_wrap;
  if (config.wrap_default_module_classes) {
    if (known.empty()) {
      throw std::invalid_argument("wrap_policy: this model lists no module classes, so the default (wrap every "
                                  "decoder layer class) does not apply; name the modules with sub_modules_to_wrap");
    }
    for (auto& name : known) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (auto& name : names) {
    bool found = false;
    for (auto& [class_name, pattern] : classes) {
      if (class_name == name) {
        add(pattern);
        found = true;
      }
    }
    if (!found) {
      throw std::invalid_argument("wrap_policy.transformer_layer_cls_to_wrap: '" + name +
                                  "' is not a module class of this model (known: " + known_text + ")");
    }
  }
  for (auto& pattern : expert_patterns(config.expert_classes_to_wrap, expert_module_classes())) add(pattern);
  if (config.wrap_lm_output) {
    const std::string path = output_layer_path();
    if (path.empty()) {
      throw std::invalid_argument(
          "wrap_lm_output: this model has no output layer module of its own (with tied embeddings the output "
          "layer reads the token embedding's weight); untie them (--untie-embeddings-and-output-weights) or set "
          "wrap_lm_output: false");
    }
    add(path);
  }
  for (auto& name : config.expert_classes_to_wrap) names.push_back(name);
  if (!names.empty() || config.wrap_embeddings || config.wrap_lm_output) {
    spdlog::info("fsdp2: wrap by class [{}]{}{} -> sub_modules_to_wrap [{}]", fmt::join(names, ", "),
                 config.wrap_embeddings ? " + embeddings" : "", config.wrap_lm_output ? " + lm output" : "",
                 fmt::join(out.sub_modules_to_wrap, ", "));
  }
  return out;
}

parallel::Module& FSDP2Mixin::self_module() {
  auto* module = dynamic_cast<parallel::Module*>(this);
  if (!module) throw std::logic_error("FSDP2Mixin must be mixed into a parallel::Module");
  return *module;
}

parallel::Module& FSDP2Mixin::module_at(const std::string& path) {
  parallel::Module& root = self_module();
  if (path.empty()) return root;
  for (auto& [p, m] : parallel::named_hookable_modules(root)) {
    if (p == path) return *m;
  }
  throw std::invalid_argument("module '" + path + "' is not a megacpp parallel::Module and cannot be wrapped");
}

ShardingPlan FSDP2Mixin::pre_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& given, c10::Device device) {
  const FSDP2Config config = resolve_module_classes(given);
  parallel::Module& root = self_module();
  std::vector<std::string> order;
  post_order(root, "", order);

  ShardingPlan plan;
  plan.mesh = &mesh;
  plan.options.reshard_after_forward = config.reshard_after_forward;
  plan.options.offload_to_cpu = config.offload_to_cpu;
  plan.options.pin_memory = config.pin_memory;
  plan.options.mixed_precision = {config.param_dtype, config.reduce_dtype, config.output_dtype,
                                  config.cast_forward_inputs};
  plan.options.device = device;
  plan.wrap_paths = ordered(order, match_module_paths(root, config.sub_modules_to_wrap, "sub_modules_to_wrap"));
  plan.wrap_paths.erase(std::remove(plan.wrap_paths.begin(), plan.wrap_paths.end(), ""), plan.wrap_paths.end());
  plan.cast_forward_inputs_at = cast_forward_inputs_at(config, plan.wrap_paths);
  plan.recompute_paths = ordered(order, match_module_paths(root, config.recompute_modules, "recompute_modules"));
  if (config.recompute_num_layers > 0 && static_cast<int64_t>(plan.recompute_paths.size()) > config.recompute_num_layers) {
    plan.recompute_paths.resize(static_cast<size_t>(config.recompute_num_layers));  // the first N, in forward order
  }
  if (config.recompute_core_attention) {
    std::vector<std::string> core;
    for (auto& [path, module] : parallel::named_hookable_modules(root)) {
      if (dynamic_cast<CoreAttention*>(module)) core.push_back(path);
    }
    if (core.empty()) {
      throw std::invalid_argument("--recompute-granularity selective: this model has no core attention module "
                                  "(models/layers/core_attention.h) to recompute; use --recompute-granularity full");
    }
    for (auto& path : core) plan.recompute_paths.push_back(path);
    plan.recompute_paths = ordered(order, plan.recompute_paths);
  }
  apply_expert_patch(config, plan.wrap_paths);
  for (auto& path : match_module_paths(root, config.ignored_modules, "ignored_modules")) {
    auto& module = *root.named_modules("", true)[path];
    for (auto& p : module.parameters(/*recurse=*/true)) {
      if (p.is_meta()) {
        throw std::invalid_argument("ignored_modules: '" + path + "' is on the meta device; ignored modules are not "
                                    "materialized yet, so drop --init-model-with-meta-device or the ignored module");
      }
      if (config.param_dtype && *config.param_dtype != c10::kFloat) {
        throw std::invalid_argument("ignored_modules: '" + path + "' would compute in fp32 beside " +
                                    std::string(c10::toString(*config.param_dtype)) +
                                    " activations; ignored modules support only param_dtype fp32");
      }
      plan.options.ignored_params.push_back(p);
    }
  }
  spdlog::info("fsdp2: mesh {} | wrap {} module(s) | recompute {} | ignored params {}", mesh.describe(),
               plan.wrap_paths.size(), plan.recompute_paths.size(), plan.options.ignored_params.size());
  if (config.offload_to_cpu) {
    spdlog::info("fsdp2: CPU offload: sharded parameters, gradients and optimizer state in {}host memory",
                 config.pin_memory ? "pinned " : "");
  }
  return plan;
}

std::map<std::string, bool> FSDP2Mixin::cast_forward_inputs_at(const FSDP2Config& config, const std::vector<std::string>& wrap_paths) {
  std::map<std::string, bool> by_class = cast_forward_inputs_by_class();
  for (const auto& [name, value] : config.cast_forward_inputs_by_class) by_class[name] = value;
  const auto classes = module_classes();
  std::map<std::string, bool> out;
  for (const auto& [name, value] : by_class) {
    std::vector<std::string> patterns, known;
    for (const auto& [class_name, pattern] : classes) {
      if (class_name == name) patterns.push_back(pattern);
      known.push_back(class_name);
    }
    if (patterns.empty() && config.cast_forward_inputs_by_class.count(name)) {
      throw std::invalid_argument("cast_forward_inputs: '" + name + "' is not a module class of this model (known: " +
                                  (known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))) + ")");
    }
    if (patterns.empty() || value == config.cast_forward_inputs) continue;
    int64_t count = 0;
    for (const auto& path : match_module_paths(self_module(), patterns, "cast_forward_inputs")) {
      if (std::find(wrap_paths.begin(), wrap_paths.end(), path) == wrap_paths.end()) continue;
      out[path] = value;
      ++count;
    }
    if (count > 0) spdlog::info("fsdp2: cast_forward_inputs {} for {} ({} group(s))", value, name, count);
  }
  return out;
}

void FSDP2Mixin::apply_expert_patch(const FSDP2Config& config, const std::vector<std::string>& wrap_paths) {
  std::vector<std::pair<std::string, SparseMoeBlock*>> blocks;
  for (auto& [path, module] : parallel::named_hookable_modules(self_module())) {
    if (auto* block = dynamic_cast<SparseMoeBlock*>(module)) blocks.emplace_back(path, block);
  }
  if (config.apply_expert_patch) {
    if (blocks.empty()) throw std::invalid_argument("apply_expert_patch: this model has no mixture-of-experts layers");
    for (auto& entry : blocks) entry.second->set_run_every_expert(true);
    spdlog::info("fsdp2: apply_expert_patch: every expert of {} MoE layer(s) runs each micro-batch", blocks.size());
    return;
  }
  // An expert runs only where some token chose it: wrapped alone, its gathers and reduce-scatters
  // would not line up across ranks, and the ranks would wait for each other forever.
  for (auto& path : wrap_paths) {
    for (auto& entry : blocks) {
      const std::string experts = entry.first + ".experts.";
      if (path.compare(0, experts.size(), experts) != 0) continue;
      throw std::invalid_argument(
          "'" + path + "' is an expert wrapped as its own group (sub_modules_to_wrap or wrap_policy.moe_experts): set "
          "apply_expert_patch: true in the fsdp2 config, so that every rank runs every expert each micro-batch (a rank "
          "that routed no token to it would skip its collectives), or wrap whole layers");
    }
  }
}

void FSDP2Mixin::_fully_shard(const ShardingPlan& plan) {
  for (auto& path : plan.recompute_paths) parallel::enable_recompute(module_at(path));
  if (!plan.recompute_paths.empty()) spdlog::info("fsdp2: recompute on {}", fmt::join(plan.recompute_paths, ", "));
  // output_dtype is for the model's caller: inner groups hand param_dtype activations to the
  // next layer (as torchtitan does), only the root casts its output.
  parallel::fsdp::FullyShardOptions inner = plan.options;
  inner.mixed_precision.output_dtype = c10::nullopt;
  for (auto& path : plan.wrap_paths) {
    parallel::fsdp::FullyShardOptions options = inner;
    if (auto it = plan.cast_forward_inputs_at.find(path); it != plan.cast_forward_inputs_at.end()) {
      options.mixed_precision.cast_forward_inputs = it->second;
    }
    parallel::fsdp::fully_shard(module_at(path), *plan.mesh, options);
  }
  parallel::fsdp::fully_shard(self_module(), *plan.mesh, plan.options);
  spdlog::info("fsdp2: sharded {} group(s) + root", plan.wrap_paths.size());
}

void FSDP2Mixin::set_prefetch(const FSDP2Config& config) {
  // Groups start their forward in pre-order (a layer, then the experts wrapped inside it) and
  // their backward in reverse post-order (plan_.wrap_paths reversed).
  std::vector<std::string> pre_order;
  for (auto& item : self_module().named_modules("", /*include_self=*/false)) pre_order.push_back(item.key());
  const std::vector<std::string> forward_order = ordered(pre_order, plan_.wrap_paths);
  const auto& post = plan_.wrap_paths;
  const int n = static_cast<int>(post.size());
  for (int i = 0; i < n; ++i) {
    std::vector<parallel::Module*> forward, backward;
    for (int k = 1; k <= config.num_to_forward_prefetch && i + k < n; ++k) forward.push_back(&module_at(forward_order[i + k]));
    for (int k = 1; k <= config.num_to_backward_prefetch && i - k >= 0; ++k) backward.push_back(&module_at(post[i - k]));
    if (!forward.empty()) parallel::fsdp::set_modules_to_forward_prefetch(module_at(forward_order[i]), forward);
    if (!backward.empty()) parallel::fsdp::set_modules_to_backward_prefetch(module_at(post[i]), backward);
  }
  if (config.num_to_forward_prefetch > 0 || config.num_to_backward_prefetch > 0) {
    spdlog::info("fsdp2: prefetch forward {} / backward {} group(s) ahead", config.num_to_forward_prefetch,
                 config.num_to_backward_prefetch);
  }
}

void FSDP2Mixin::fully_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& config, c10::Device device,
                             const std::function<void()>& post_shard_init) {
  if (config.num_to_forward_prefetch < 0 || config.num_to_backward_prefetch < 0) {
    throw std::invalid_argument("num_to_forward_prefetch / num_to_backward_prefetch must be >= 0");
  }
  plan_ = pre_shard(mesh, config, device);
  _fully_shard(plan_);
  set_prefetch(config);
  if (post_shard_init) {
    post_shard_init();
    spdlog::info("fsdp2: initialized weights after sharding");
  }
}

}  // namespace megacpp::models
