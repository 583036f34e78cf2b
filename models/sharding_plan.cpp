#include "models/sharding_plan.h"

#include <algorithm>
#include <stdexcept>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "models/layers/core_attention.h"
#include "models/module_path.h"
#include "parallel/fsdp/comm_streams.h"

namespace megacpp::models {
namespace {

// Megatron's recompute: the modules recompute_modules names (the first recompute_num_layers,
// when set), and with recompute_core_attention every core attention module.
std::vector<std::string> recompute_paths(LanguageModel& model, const RecomputePolicy& recompute, const std::vector<std::string>& order) {
  std::vector<std::string> paths = in_order_of(order, match_module_paths(model, recompute.recompute_modules, "recompute_modules"));
  if (recompute.recompute_num_layers > 0 && static_cast<int64_t>(paths.size()) > recompute.recompute_num_layers) {
    paths.resize(static_cast<size_t>(recompute.recompute_num_layers));  // the first N, in forward order
  }
  if (!recompute.recompute_core_attention) return paths;
  std::vector<std::string> core;
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    if (dynamic_cast<CoreAttention*>(module)) core.push_back(path);
  }
  if (core.empty()) {
    throw std::invalid_argument("--recompute-granularity selective: this model has no core attention module "
                                "(models/layers/core_attention.h) to recompute; use --recompute-granularity full");
  }
  for (auto& path : core) paths.push_back(path);
  return in_order_of(order, paths);
}

// cast_forward_inputs of the wrapped modules whose class the config (over the model's
// cast_forward_inputs_by_class) gives a value other than the config's own.
std::map<std::string, bool> cast_forward_inputs_at(LanguageModel& model, const ShardingPolicy& sharding,
                                                   const std::vector<std::string>& wrap_paths) {
  std::map<std::string, bool> by_class = model.cast_forward_inputs_by_class();
  for (const auto& [name, value] : sharding.cast_forward_inputs_by_class) by_class[name] = value;
  const auto classes = model.module_classes();
  std::map<std::string, bool> out;
  for (const auto& [name, value] : by_class) {
    std::vector<std::string> patterns, known;
    for (const auto& [class_name, pattern] : classes) {
      if (class_name == name) patterns.push_back(pattern);
      known.push_back(class_name);
    }
    if (patterns.empty() && sharding.cast_forward_inputs_by_class.count(name)) {
      throw std::invalid_argument("cast_forward_inputs: '" + name + "' is not a module class of this model (known: " +
                                  (known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))) + ")");
    }
    if (patterns.empty() || value == sharding.cast_forward_inputs) continue;
    int64_t count = 0;
    for (const auto& path : match_module_paths(model, patterns, "cast_forward_inputs")) {
      if (std::find(wrap_paths.begin(), wrap_paths.end(), path) == wrap_paths.end()) continue;
      out[path] = value;
      ++count;
    }
    if (count > 0) spdlog::info("fsdp2: cast_forward_inputs {} for {} ({} group(s))", value, name, count);
  }
  return out;
}

std::vector<at::Tensor> ignored_parameters(LanguageModel& model, const std::vector<std::string>& ignored_modules,
                                           const ShardingPolicy& sharding) {
  std::vector<at::Tensor> out;
  for (auto& path : match_module_paths(model, ignored_modules, "ignored_modules")) {
    auto& module = *model.named_modules("", true)[path];
    for (auto& p : module.parameters(/*recurse=*/true)) {
      if (p.is_meta()) {
        throw std::invalid_argument("ignored_modules: '" + path + "' is on the meta device; ignored modules are not "
                                    "materialized yet, so drop --init-model-with-meta-device or the ignored module");
      }
      if (sharding.param_dtype && *sharding.param_dtype != c10::kFloat) {
        throw std::invalid_argument("ignored_modules: '" + path + "' would compute in fp32 beside " +
                                    std::string(c10::toString(*sharding.param_dtype)) +
                                    " activations; ignored modules support only param_dtype fp32");
      }
      out.push_back(p);
    }
  }
  return out;
}

// With tied embeddings (no output layer of its own) the output reads the token embedding's
// weight after the embedding's forward: as its own group, that weight would be freed by then.
void refuse_tied_embedding_group(const LanguageModel& model, const std::vector<std::string>& wrap_paths) {
  const std::string embedding = model.input_embeddings_path();
  if (embedding.empty() || !model.output_layer_path().empty()) return;
  if (std::find(wrap_paths.begin(), wrap_paths.end(), embedding) == wrap_paths.end()) return;
  throw std::invalid_argument(
      "sub_modules_to_wrap / wrap_embeddings: '" + embedding + "' cannot be its own group while embeddings and output "
      "weights are tied (the output layer reads its weight after it would be freed); remove it or untie them "
      "(--untie-embeddings-and-output-weights). A model with an output layer of its own returns its path from "
      "FSDP2Mixin::output_layer_path");
}

}  // namespace

ShardingPlan make_sharding_plan(LanguageModel& model, const parallel::DeviceMesh& mesh, const WrapPolicy& wrap,
                                const RecomputePolicy& recompute, const ShardingPolicy& sharding, c10::Device device) {
  const std::vector<std::string> order = post_order_module_paths(model);
  ShardingPlan plan;
  plan.mesh = &mesh;
  plan.options.reshard_after_forward = sharding.reshard_after_forward;
  plan.options.offload_to_cpu = sharding.offload_to_cpu;
  plan.options.pin_memory = sharding.pin_memory;
  plan.options.mixed_precision = {sharding.param_dtype, sharding.reduce_dtype, sharding.output_dtype, sharding.cast_forward_inputs};
  plan.options.device = device;
  plan.wrap_paths = in_order_of(order, match_module_paths(model, wrap.sub_modules_to_wrap, "sub_modules_to_wrap"));
  plan.wrap_paths.erase(std::remove(plan.wrap_paths.begin(), plan.wrap_paths.end(), ""), plan.wrap_paths.end());
  refuse_tied_embedding_group(model, plan.wrap_paths);
  plan.cast_forward_inputs_at = cast_forward_inputs_at(model, sharding, plan.wrap_paths);
  plan.recompute_paths = recompute_paths(model, recompute, order);
  plan.options.ignored_params = ignored_parameters(model, wrap.ignored_modules, sharding);
  spdlog::info("fsdp2: mesh {} | wrap {} module(s) | recompute {} | ignored params {}", mesh.describe(),
               plan.wrap_paths.size(), plan.recompute_paths.size(), plan.options.ignored_params.size());
  if (sharding.offload_to_cpu) {
    spdlog::info("fsdp2: CPU offload: sharded parameters, gradients and optimizer state in {}host memory",
                 sharding.pin_memory ? "pinned " : "");
  }
  if (device.is_cuda()) {
    spdlog::info("fsdp2: streams: {}", parallel::fsdp::CommStreams::for_device(device)
                                           ? "all-gather copy-in, all-gathers and reduce-scatters on side streams"
                                           : "one (MEGACPP_FSDP_STREAMS=0)");
  }
  return plan;
}

}  // namespace megacpp::models
