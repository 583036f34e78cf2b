#include "parallel/fsdp/fsdp_param.h"

#include <torch/torch.h>

#include <mutex>
#include <unordered_map>

#include "parallel/collectives.h"
#include "parallel/fsdp/storage.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::parallel::fsdp {
namespace {

// Sharded master -> its FSDPParam, so initialization and checkpoint code can find the shard
// math for a parameter they only know as a tensor.
std::mutex registry_mutex;
std::unordered_map<const c10::TensorImpl*, FSDPParam*>& registry() {
  static std::unordered_map<const c10::TensorImpl*, FSDPParam*> map;
  return map;
}

}  // namespace

FSDPParam* find_fsdp_param(const at::Tensor& tensor) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(tensor.unsafeGetTensorImpl());
  return it == registry().end() ? nullptr : it->second;
}

FSDPParam::~FSDPParam() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().erase(sharded_.unsafeGetTensorImpl());
}

FSDPParam::FSDPParam(std::string fqn, std::vector<Use> uses, const at::Tensor& original,
                     ShardLayout layout, const Group& shard_group, const Placement& placement)
    : fqn_(std::move(fqn)),
      uses_(std::move(uses)),
      layout_(std::move(layout)),
      shard_group_(shard_group),
      compute_device_(placement.device),
      pinned_(placement.offload_to_cpu && placement.pin_memory),
      requires_grad_(original.requires_grad()) {
  torch::NoGradGuard no_grad;
  auto master_options = torch::TensorOptions().dtype(torch::kFloat).device(placement.device);
  auto shard_options = master_options;
  if (placement.offload_to_cpu) shard_options = shard_options.device(c10::kCPU).pinned_memory(placement.pin_memory);
  sharded_ = torch::empty(layout_.shard_shape(shard_group.rank), shard_options);
  if (!original.is_meta()) load_full(original);
  sharded_.set_requires_grad(requires_grad_);
  carry_tensor_parallel_placement(original, sharded_);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry()[sharded_.unsafeGetTensorImpl()] = this;
  }

  std::vector<int64_t> padded_shape = layout_.shape;
  padded_shape[0] = layout_.world * layout_.chunk_rows;
  unsharded_padded_ = torch::empty(padded_shape, master_options.dtype(placement.param_dtype));
  unsharded_writer_ = unsharded_padded_.variable_data();
  unsharded_ = unsharded_padded_.narrow(0, 0, layout_.rows).detach();
  unsharded_.set_requires_grad(requires_grad_);
  free_unsharded();
  point_modules_at_sharded();
}

void FSDPParam::copy_shard_to(const at::Tensor& slot) const {
  const int64_t numel = sharded_.numel();
  at::Tensor shard = sharded_.detach().reshape({-1});
  // From pinned host memory without blocking; to another dtype, moved as it is and then cast on the
  // device (as FSDP2 does): a copy that casts on the way casts on the host into pageable memory,
  // and a copy from there blocks.
  if (pinned_ && shard.scalar_type() != slot.scalar_type()) shard = shard.to(slot.device(), /*non_blocking=*/true);
  slot.narrow(0, 0, numel).copy_(shard, /*non_blocking=*/pinned_);
  if (numel < slot.numel()) slot.narrow(0, numel, slot.numel() - numel).zero_();
}

void FSDPParam::copy_out(const at::Tensor& gathered, int64_t offset) {
  const int64_t cols = layout_.padded_numel();
  allocate_storage(unsharded_writer_, unsharded_writer_.numel() * unsharded_writer_.element_size());
  unsharded_writer_.view({layout_.world, cols}).copy_(gathered.narrow(1, offset, cols));
}

void FSDPParam::free_unsharded() { free_storage(unsharded_writer_); }


void FSDPParam::point_modules_at_unsharded() {
  for (auto& use : uses_) use.module->set_compute_tensor(use.name, unsharded_);
}

void FSDPParam::point_modules_at_sharded() {
  for (auto& use : uses_) use.module->replace_parameter(use.name, sharded_);
}

void FSDPParam::pack_gradient(const at::Tensor& columns) {
  at::Tensor grad = unsharded_.grad();
  if (!grad.defined()) {
    columns.zero_();
    return;
  }
  const int64_t padding = columns.numel() - grad.numel();
  at::Tensor flat = grad.reshape({-1});
  if (padding > 0) flat = at::constant_pad_nd(flat, {0, padding});
  columns.copy_(flat.view(columns.sizes()));
  unsharded_.mutable_grad() = at::Tensor();
}

void FSDPParam::accumulate_sharded_grad(const at::Tensor& chunk) {
  const int64_t numel = sharded_.numel();
  at::Tensor reduced = chunk.narrow(0, 0, numel).view(sharded_.sizes()).to(sharded_.device(), torch::kFloat);
  at::Tensor& grad = sharded_.mutable_grad();
  if (grad.defined()) {
    grad.add_(reduced);
  } else {
    grad = reduced.clone(at::MemoryFormat::Contiguous);
  }
}

}  // namespace megacpp::parallel::fsdp

namespace megacpp::parallel::fsdp {

at::Tensor FSDPParam::gather_full() const {
  torch::NoGradGuard no_grad;
  auto options = torch::TensorOptions().dtype(torch::kFloat).device(compute_device_);
  at::Tensor input = torch::empty({layout_.padded_numel()}, options);
  copy_shard_to(input);
  at::Tensor output = torch::empty({layout_.world * layout_.padded_numel()}, options);
  all_gather_into_tensor(shard_group_, output, input).wait();
  std::vector<int64_t> padded_shape = layout_.shape;
  padded_shape[0] = layout_.world * layout_.chunk_rows;
  return output.view(padded_shape).narrow(0, 0, layout_.rows).clone();
}

void FSDPParam::load_full(const at::Tensor& full) {
  TORCH_CHECK(full.sizes().vec() == layout_.shape, "parameter '", fqn_, "': expected shape ",
              c10::IntArrayRef(layout_.shape), ", got ", full.sizes());
  torch::NoGradGuard no_grad;
  const int rank = shard_group_.rank;
  sharded_.copy_(full.narrow(0, layout_.first_row(rank), layout_.rows_on(rank)));
}

}  // namespace megacpp::parallel::fsdp
