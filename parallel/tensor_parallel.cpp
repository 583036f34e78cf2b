#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include <torch/csrc/utils/tensor_flatten.h>
#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/group_capsule.h"

namespace megacpp::parallel {
namespace {

// Parameter -> its placement. The weak reference keeps a recorded tensor's address from being
// reused by another tensor while the entry exists; entries of freed tensors are dropped lazily.
struct Entry {
  c10::weak_intrusive_ptr<c10::TensorImpl> tensor;
  TensorParallelPlacement placement;
};
std::mutex registry_mutex;
std::unordered_map<const c10::TensorImpl*, Entry>& registry() {
  static std::unordered_map<const c10::TensorImpl*, Entry> map;
  return map;
}

void record(const at::Tensor& tensor, TensorParallelPlacement placement) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto& map = registry();
  // The pass that drops freed tensors' entries runs once the map has doubled since the last one,
  // so recording n parameters costs O(n), not O(n^2). Until then a stale entry only holds its
  // address (the weak reference), so no new tensor can be mistaken for it.
  static size_t size_after_sweep = 0;
  if (map.size() >= 2 * std::max<size_t>(size_after_sweep, 32)) {
    for (auto it = map.begin(); it != map.end();) it = it->second.tensor.expired() ? map.erase(it) : std::next(it);
    size_after_sweep = map.size();
  }
  map.insert_or_assign(tensor.unsafeGetTensorImpl(),
                       Entry{c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr()), std::move(placement)});
}

at::Tensor summed(const at::Tensor& x, const Group& group) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
  all_reduce(group, out, ReduceOp::kSum).wait();
  return out;
}

// Forward the identity and backward an all-reduce (kSumInBackward), or the other way round:
// Megatron's copy_to_ and reduce_from_tensor_model_parallel_region.
template <bool kSumInBackward>
struct Region : torch::autograd::Function<Region<kSumInBackward>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<GroupHolder>& holder) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(holder);
    return kSumInBackward ? x.view_as(x) : summed(x, holder->group);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
    return {kSumInBackward ? summed(grads[0], holder->group) : grads[0], at::Tensor()};
  }
};

}  // namespace

void split_parameter(Module& module, const std::string& slot, int dim, const Group& group, int64_t parts) {
  const at::Tensor& full = *module.param_slot(slot).member;
  TORCH_CHECK(parts == 1 || dim == 0, "tensor parallelism: a parameter in parts is split along dim 0");
  TensorParallelPlacement placement{group, dim, full.sizes().vec(), parts};
  at::Tensor local;
  {
    torch::NoGradGuard no_grad;
    local = tensor_parallel_slice(full, placement).clone(at::MemoryFormat::Contiguous);
  }
  local.set_requires_grad(full.requires_grad());
  module.replace_parameter(slot, local);
  record(local, std::move(placement));
}

void mark_partial_gradient(Module& module, const std::string& slot, const Group& group) {
  const at::Tensor& tensor = *module.param_slot(slot).member;
  record(tensor, {group, -1, tensor.sizes().vec()});
}

const TensorParallelPlacement* tensor_parallel_placement(const at::Tensor& param) {
  if (!param.defined()) return nullptr;
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(param.unsafeGetTensorImpl());
  return it == registry().end() ? nullptr : &it->second.placement;
}

void carry_tensor_parallel_placement(const at::Tensor& from, const at::Tensor& to) {
  if (const TensorParallelPlacement* placement = tensor_parallel_placement(from)) record(to, *placement);
}

at::Tensor tensor_parallel_slice(const at::Tensor& full, const TensorParallelPlacement& placement) {
  if (!placement.is_split()) return full;
  const int64_t size = placement.share();
  if (placement.parts == 1) return full.narrow(placement.dim, placement.share_start(0), size);
  std::vector<at::Tensor> shares;
  for (int64_t k = 0; k < placement.parts; ++k) shares.push_back(full.narrow(placement.dim, placement.share_start(k), size));
  return torch::cat(shares, placement.dim);
}

at::Tensor gather_tensor_parallel(const at::Tensor& local, const TensorParallelPlacement& placement) {
  if (!placement.is_split() || placement.group.size() == 1) return local;
  torch::NoGradGuard no_grad;
  const at::Tensor by_rank = all_gather_along(placement.group, local, placement.dim).contiguous();
  if (placement.parts == 1) return by_rank;
  // [rank][part][rows] along dim 0 -> [part][rank][rows]
  std::vector<int64_t> blocks{placement.group.size(), placement.parts, -1};
  const auto rest = by_rank.sizes().slice(1);
  blocks.insert(blocks.end(), rest.begin(), rest.end());
  return by_rank.view(blocks).transpose(0, 1).reshape(by_rank.sizes());
}

void all_reduce_input_gradient(Module& module, const Group& group) {
  module.add_pre_hook([group](Module&, const Module::Tensors& inputs) {
    Module::Tensors out = inputs;
    out[0] = Region<true>::apply(inputs.at(0), c10::make_intrusive<GroupHolder>(group));
    return out;
  });
}

void all_reduce_output(Module& module, const Group& group) {
  module.add_post_hook([group](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    TORCH_CHECK(outputs.size() == 1, "tensor parallelism: a row-parallel module gives one output, got ", outputs.size());
    return {Region<false>::apply(outputs[0], c10::make_intrusive<GroupHolder>(group))};
  });
}

void add_bias_once_around(Module& module, const std::string& slot, const std::function<void()>& add_reduction) {
  // The member: FSDP2 points it at the gathered parameter for each forward.
  const at::Tensor* bias = module.param_slot(slot).member;
  module.add_post_hook([bias](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    return {outputs.at(0) - *bias};
  });
  add_reduction();
  module.add_post_hook([bias](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    return {outputs.at(0) + *bias};
  });
}

void all_reduce_output_gradient(Module& module, const Group& group) {
  module.add_post_hook([group](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    TORCH_CHECK(outputs.size() == 1, "tensor parallelism: the output layer's input is one tensor, got ", outputs.size());
    return {Region<true>::apply(outputs[0], c10::make_intrusive<GroupHolder>(group))};
  });
}

void all_reduce_partial_gradients(const std::vector<at::Tensor>& params, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  // One flat all-reduce per TP group and dtype: the partial gradients are many and small (the
  // norms, row-parallel biases, LoRA's replicated factors).
  struct Bucket {
    Group group;
    std::vector<at::Tensor> params;
  };
  std::map<std::pair<std::vector<int>, c10::ScalarType>, Bucket> buckets;  // ordered alike on every rank
  for (const auto& p : params) {
    const TensorParallelPlacement* placement = tensor_parallel_placement(p);
    if (!placement || placement->is_split() || !p.grad().defined()) continue;
    auto bucket = buckets.try_emplace({placement->group.global_ranks, p.grad().scalar_type()}, Bucket{placement->group, {}});
    bucket.first->second.params.push_back(p);
  }
  for (auto& [key, bucket] : buckets) {
    std::vector<at::Tensor> grads;
    for (const auto& p : bucket.params) grads.push_back(p.grad().to(device));
    at::Tensor flat = torch::utils::flatten_dense_tensors(grads);
    all_reduce(bucket.group, flat, ReduceOp::kSum).wait();
    const std::vector<at::Tensor> sums = torch::utils::unflatten_dense_tensors(flat, grads);
    for (size_t i = 0; i < sums.size(); ++i) bucket.params[i].mutable_grad().copy_(sums[i]);
  }
}

}  // namespace megacpp::parallel
