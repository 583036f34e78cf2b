// Note [Gradient reduction]
// After a group's backward every rank holds full gradients of the group's parameters. They
// are cast to reduce_dtype and packed into one [world, shard_numel] buffer whose row j holds
// chunk j of every gradient (padded), reduce-scattered over the fsdp group so rank j receives
// the sum of row j, then (HSDP) all-reduced over the ddp group, divided by the data-parallel
// size (mean over all ranks' micro-batches) and added into the fp32 shards' .grad.
// Parameters with requires_grad=false are gathered but take no part in this; parameters
// that got no gradient contribute zeros, so every rank issues the same collectives.
#include "parallel/fsdp/fsdp_param_group.h"

#include <torch/torch.h>

namespace megacpp::parallel::fsdp {

FSDPParamGroup::FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                               const DeviceMesh& mesh, const FullyShardOptions& options)
    : name_(std::move(name)),
      params_(std::move(params)),
      mesh_(mesh),
      options_(options),
      param_dtype_(options.mixed_precision.param_dtype.value_or(torch::kFloat)),
      reduce_dtype_(options.mixed_precision.reduce_dtype.value_or(param_dtype_)) {
  for (auto& param : params_) {
    offsets_.push_back(shard_numel_);
    shard_numel_ += param->layout().padded_numel();
  }
}

bool FSDPParamGroup::has_trainable_params() const {
  for (auto& param : params_) {
    if (param->requires_grad()) return true;
  }
  return false;
}

void FSDPParamGroup::unshard_async() {
  if (state_ != State::kSharded || params_.empty()) return;
  torch::NoGradGuard no_grad;
  auto options = torch::TensorOptions().dtype(param_dtype_).device(options_.device);
  at::Tensor input = torch::empty({shard_numel_}, options);  // [shard_numel]
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i]->copy_shard_to(input.narrow(0, offsets_[i], params_[i]->layout().padded_numel()));
  }
  gather_output_ = torch::empty({mesh_.fsdp().size(), shard_numel_}, options);
  pending_gather_ = all_gather_into_tensor(mesh_.fsdp(), gather_output_.view({-1}), input);
  state_ = State::kGathering;
}

void FSDPParamGroup::wait_for_unshard() {
  if (state_ == State::kSharded) unshard_async();
  if (state_ != State::kGathering) return;
  pending_gather_.wait();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i]->copy_out(gather_output_, offsets_[i]);
    params_[i]->point_modules_at_unsharded();
  }
  gather_output_.reset();
  state_ = State::kUnsharded;
}

void FSDPParamGroup::reshard() {
  if (state_ == State::kGathering) {
    // A prefetch nobody consumed: finish it so the buffer is not freed while in flight.
    pending_gather_.wait();
    gather_output_.reset();
  }
  for (auto& param : params_) {
    param->free_unsharded();
    param->point_modules_at_sharded();
  }
  state_ = State::kSharded;
}

void FSDPParamGroup::reduce_gradients() {
  if (!has_trainable_params()) return;
  torch::NoGradGuard no_grad;
  const int world = mesh_.fsdp().size();
  auto options = torch::TensorOptions().dtype(reduce_dtype_).device(options_.device);
  at::Tensor packed = torch::empty({world, shard_numel_}, options);  // [world, shard_numel]
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->requires_grad()) continue;
    params_[i]->pack_gradient(packed.narrow(1, offsets_[i], params_[i]->layout().padded_numel()));
  }
  at::Tensor reduced = torch::empty({shard_numel_}, options);  // [shard_numel]
  reduce_scatter_tensor(mesh_.fsdp(), reduced, packed.view({-1}), ReduceOp::kSum).wait();
  if (mesh_.is_hsdp()) all_reduce(mesh_.ddp(), reduced, ReduceOp::kSum).wait();
  reduced.div_(mesh_.data_parallel_size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->requires_grad()) continue;
    params_[i]->accumulate_sharded_grad(reduced.narrow(0, offsets_[i], params_[i]->layout().padded_numel()));
  }
}

}  // namespace megacpp::parallel::fsdp
