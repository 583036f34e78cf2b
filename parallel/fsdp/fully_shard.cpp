#include "parallel/fsdp/fully_shard.h"

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "parallel/fsdp/group_reads.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::parallel::fsdp {
namespace {

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// The parameters fully_shard(module) takes: slots not owned by nested groups or ignored,
// deduplicated (a tensor shared by several slots is one parameter with several uses).
std::vector<std::unique_ptr<FSDPParam>> collect_params(Module& module, const DeviceMesh& mesh,
                                                       const FullyShardOptions& options) {
  require_parameters_in_slots(module);
  std::unordered_set<const c10::TensorImpl*> ignored;
  for (auto& p : options.ignored_params) ignored.insert(p.unsafeGetTensorImpl());

  struct Pending {
    std::string fqn;
    at::Tensor tensor;
    std::vector<FSDPParam::Use> uses;
  };
  std::vector<Pending> pending;
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (auto& [path, m] : named_hookable_modules(module)) {
    for (auto& slot : m->param_slots()) {
      const at::Tensor& tensor = *slot.member;
      const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
      seen.insert(impl);
      if (!tensor.defined() || ignored.count(impl) || find_fsdp_param(tensor)) continue;
      auto it = index.find(impl);
      if (it == index.end()) {
        index[impl] = pending.size();
        pending.push_back({join_path(path, slot.name), tensor, {}});
        it = index.find(impl);
      }
      pending[it->second].uses.push_back({m, slot.name});
    }
  }
  // What no slot holds belongs to a plain torch::nn::Module (require_parameters_in_slots covers
  // parallel::Modules).
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!seen.count(item.value().unsafeGetTensorImpl()) && !ignored.count(item.value().unsafeGetTensorImpl())) {
      // Never the root's own: the root is a parallel::Module, checked above.
      const std::string& key = item.key();
      throw std::invalid_argument("fully_shard: parameter '" + key + "' belongs to module '" + key.substr(0, key.rfind('.')) +
                                  "', a torch::nn::Module that is not a megacpp parallel::Module, so FSDP cannot shard it: "
                                  "build that module on parallel::Module (models/layers has Linear, Embedding and the "
                                  "norms) or leave it unsharded (ignored_modules)");
    }
  }
  const FSDPParam::Placement placement{options.device, options.mixed_precision.param_dtype.value_or(torch::kFloat),
                                       options.offload_to_cpu, options.pin_memory};
  std::vector<std::unique_ptr<FSDPParam>> params;
  for (auto& p : pending) {
    if (p.tensor.dim() == 0) {
      throw std::invalid_argument("fully_shard: parameter '" + p.fqn +
                                  "' is 0-dimensional; FSDP shards on dim 0 (give it shape [1])");
    }
    auto layout = compute_shard_layout(p.tensor.sizes().vec(), mesh.fsdp().size());
    params.push_back(std::make_unique<FSDPParam>(p.fqn, std::move(p.uses), p.tensor, layout, mesh.fsdp(), placement));
  }
  return params;
}

FSDPState& state_or_throw(const Module& module, const char* what) {
  FSDPState* state = fsdp_state(module);
  if (!state) {
    throw std::invalid_argument(std::string(what) + ": module '" + module.name() +
                                "' has not been passed to fully_shard");
  }
  return *state;
}

std::vector<FSDPState*> states_of(const std::vector<Module*>& modules, const char* what) {
  std::vector<FSDPState*> out;
  for (auto* m : modules) out.push_back(&state_or_throw(*m, what));
  return out;
}

}  // namespace

FSDPState& fully_shard(Module& module, const DeviceMesh& mesh, const FullyShardOptions& options) {
  if (fsdp_state(module)) {
    throw std::invalid_argument("fully_shard: module '" + module.name() + "' is already sharded");
  }
  if (options.offload_to_cpu && !options.device.is_cuda()) {
    throw std::invalid_argument("fully_shard: CPU offload needs a CUDA device (the shards would already be in host memory "
                                "on " + options.device.str() + ")");
  }
  auto params = collect_params(module, mesh, options);
  std::unique_ptr<FSDPParamGroup> group;
  if (!params.empty()) {
    group = std::make_unique<FSDPParamGroup>(module.name(), std::move(params), mesh, options);
  }
  for (auto& [path, m] : named_hookable_modules(module)) {
    if (auto* nested = m->attachment<FSDPState>()) nested->mark_not_root();
  }
  auto state = std::make_shared<FSDPState>(module, std::move(group), mesh, options);
  FSDPState* raw = state.get();
  module.attach(state);
  module.add_pre_hook([raw](Module&, const Module::Tensors& inputs) { return raw->pre_forward(inputs); });
  module.add_post_hook([raw](Module&, const Module::Tensors&, const Module::Tensors& outputs) {
    return raw->post_forward(outputs);
  });
  module.add_forward_wrapper([raw](const Module::Forward& forward, const Module::Tensors& inputs) {
    if (!raw->is_root()) return forward(inputs);
    try {
      return forward(inputs);
    } catch (c10::Error& e) {  // libtorch's size errors; Note [Reading another group's parameter]
      const std::string why = explain_sharded_read(raw->group_params(), e.what_without_backtrace());
      if (!why.empty()) e.add_context(why);
      throw;
    }
  });
  return *raw;
}

FSDPState* fsdp_state(const Module& module) { return module.attachment<FSDPState>(); }

void reshard(Module& module) {
  if (FSDPParamGroup* group = state_or_throw(module, "reshard").group()) group->reshard();
}

void set_modules_to_forward_prefetch(Module& module, const std::vector<Module*>& modules) {
  state_or_throw(module, "set_modules_to_forward_prefetch")
      .set_forward_prefetch(states_of(modules, "set_modules_to_forward_prefetch"));
}

void set_modules_to_backward_prefetch(Module& module, const std::vector<Module*>& modules) {
  state_or_throw(module, "set_modules_to_backward_prefetch")
      .set_backward_prefetch(states_of(modules, "set_modules_to_backward_prefetch"));
}

void set_requires_gradient_sync(Module& root, bool sync) {
  state_or_throw(root, "set_requires_gradient_sync").set_requires_gradient_sync(sync);
}

void set_gradient_divide_factor(Module& root, double factor) {
  if (!(factor > 0)) throw std::invalid_argument("set_gradient_divide_factor: the factor must be positive");
  state_or_throw(root, "set_gradient_divide_factor").set_gradient_divide_factor(factor);
}

std::vector<int64_t> full_shape(const at::Tensor& param) {
  if (const auto* tp = tensor_parallel_placement(param); tp && tp->is_split()) return tp->full_shape;
  if (auto* p = find_fsdp_param(param)) return p->layout().shape;
  return param.sizes().vec();
}

void copy_full_into_parameter(const at::Tensor& param, const at::Tensor& full) {
  const auto* tp = tensor_parallel_placement(param);
  if (tp && tp->is_split()) {
    TORCH_CHECK(full.sizes().vec() == tp->full_shape, "copy_full_into_parameter: expected shape ",
                c10::IntArrayRef(tp->full_shape), ", got ", full.sizes());
  }
  const at::Tensor local = tp ? tensor_parallel_slice(full, *tp) : full;
  if (auto* p = find_fsdp_param(param)) {
    p->load_full(local);
    return;
  }
  torch::NoGradGuard no_grad;
  TORCH_CHECK(param.sizes() == local.sizes(), "copy_full_into_parameter: expected shape ",
              param.sizes(), ", got ", local.sizes());
  param.copy_(local);
}

at::Tensor gather_full_parameter(const at::Tensor& param) {
  torch::NoGradGuard no_grad;
  const FSDPParam* p = find_fsdp_param(param);
  const at::Tensor local = p ? p->gather_full() : param.detach();
  const auto* tp = tensor_parallel_placement(param);
  return tp ? gather_tensor_parallel(local, *tp) : local;
}

std::map<std::string, at::Tensor> gather_full_parameters(torch::nn::Module& root) {
  std::map<std::string, at::Tensor> out;
  for (auto& item : root.named_parameters(/*recurse=*/true)) {
    const at::Tensor full = gather_full_parameter(item.value());
    out[item.key()] = full.is_alias_of(item.value()) ? full.to(torch::kFloat, false, true) : full.to(torch::kFloat);  // never the parameter
  }
  return out;
}

}  // namespace megacpp::parallel::fsdp
