// Note [Gradient reduction]
// After a group's backward every rank holds full gradients of the group's parameters. They
// are cast to reduce_dtype and packed into one [world, shard_numel] buffer whose row j holds
// chunk j of every gradient (padded), reduce-scattered over the fsdp group so rank j receives
// the sum of row j, then (HSDP) all-reduced over the ddp group, divided by the data-parallel
// size (mean over all ranks' micro-batches; or the gradient divide factor) and added into the
// fp32 shards' .grad. The reduce-scatter is issued when the group's backward ends and waited
// for when the next group's is issued or at the end of backward (Note [Overlap]), so it runs
// while the next group computes. On a CUDA device the copy-in, the collectives and the
// post-reduce run on side streams (Note [Streams] in comm_streams.cpp).
// Parameters with requires_grad=false are gathered but take no part in this; parameters
// that got no gradient contribute zeros, so every rank issues the same collectives.
#include "parallel/fsdp/fsdp_param_group.h"

#include <c10/core/StreamGuard.h>
#include <torch/torch.h>

#include <optional>

#include "parallel/fsdp/engine_trace.h"

namespace megacpp::parallel::fsdp {
namespace {

// Note [Streams]: what follows in `guard`'s scope is enqueued on `stream`, after what `after` has
// enqueued so far.
void continue_on(std::optional<c10::StreamGuard>& guard, const c10::Stream& stream, const c10::Stream& after) {
  wait_stream(stream, after);
  guard.reset();
  guard.emplace(stream);
}

}  // namespace

FSDPParamGroup::FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                               const DeviceMesh& mesh, const FullyShardOptions& options)
    : name_(std::move(name)),
      params_(std::move(params)),
      mesh_(mesh),
      options_(options),
      param_dtype_(options.mixed_precision.param_dtype.value_or(torch::kFloat)),
      reduce_dtype_(options.mixed_precision.reduce_dtype.value_or(param_dtype_)),
      streams_(CommStreams::for_device(options.device)) {
  for (auto& param : params_) {
    offsets_.push_back(shard_numel_);
    shard_numel_ += param->layout().padded_numel();
  }
}

FSDPParamGroup::~FSDPParamGroup() {
  // Note [Streams]: buffers still in flight (an error after a prefetch) go back once their collective is done.
  if (!streams_) return;
  if (gathered_) gathered_->block(streams_->copy_in());
  if (reduce_scattered_) reduce_scattered_->block(streams_->current());
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
  std::optional<c10::StreamGuard> on_side_stream;
  // After compute: the optimizer may just have stepped the shards.
  if (streams_) continue_on(on_side_stream, streams_->copy_in(), streams_->current());
  auto options = torch::TensorOptions().dtype(param_dtype_).device(options_.device);
  gather_input_ = torch::empty({shard_numel_}, options);  // [shard_numel]
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i]->copy_shard_to(gather_input_.narrow(0, offsets_[i], params_[i]->layout().padded_numel()));
  }
  gather_output_ = torch::empty({mesh_.fsdp().size(), shard_numel_}, options);
  if (streams_) continue_on(on_side_stream, streams_->all_gather(), streams_->copy_in());
  pending_gather_ = all_gather_into_tensor(mesh_.fsdp(), gather_output_.view({-1}), gather_input_);
  if (streams_) {
    pending_gather_.wait();  // NCCL: the all-gather stream waits for NCCL's; the CPU goes on
    gathered_ = record_event(streams_->all_gather());
  }
  trace_engine("all-gather " + name_);
  state_ = State::kGathering;
}

void FSDPParamGroup::wait_for_unshard() {
  if (state_ == State::kSharded) unshard_async();
  if (state_ != State::kGathering) return;
  wait_for_gather();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i]->copy_out(gather_output_, offsets_[i]);
    params_[i]->point_modules_at_unsharded();
  }
  release_gather_buffers();
  state_ = State::kUnsharded;
}

void FSDPParamGroup::wait_for_gather() {
  if (streams_) {
    gathered_->block(streams_->current());
    gathered_.reset();
  } else {
    pending_gather_.wait();
  }
}

void FSDPParamGroup::release_gather_buffers() {
  // Allocated on the copy-in stream, which must not reuse them before their readers are done:
  // the copy-out on the current stream, which came after the collective.
  if (streams_) record_event(streams_->current()).block(streams_->copy_in());
  gather_input_.reset();
  gather_output_.reset();
}

void FSDPParamGroup::reshard() {
  if (state_ == State::kGathering) {
    // A prefetch nobody consumed: finish it so the buffers are not reused while in flight.
    wait_for_gather();
    release_gather_buffers();
  }
  for (auto& param : params_) {
    param->free_unsharded();
    param->point_modules_at_sharded();
  }
  state_ = State::kSharded;
}

void FSDPParamGroup::reduce_gradients_async() {
  if (!has_trainable_params()) return;
  torch::NoGradGuard no_grad;
  const int world = mesh_.fsdp().size();
  auto options = torch::TensorOptions().dtype(reduce_dtype_).device(options_.device);
  // Packed on the compute stream, where the gradients are, so they can be freed right away.
  reduce_input_ = torch::empty({world, shard_numel_}, options);  // [world, shard_numel]
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->requires_grad()) continue;
    params_[i]->pack_gradient(reduce_input_.narrow(1, offsets_[i], params_[i]->layout().padded_numel()));
  }
  std::optional<c10::StreamGuard> on_side_stream;
  if (streams_) continue_on(on_side_stream, streams_->reduce_scatter(), streams_->current());
  reduce_output_ = torch::empty({shard_numel_}, options);  // [shard_numel]
  pending_reduce_ = reduce_scatter_tensor(mesh_.fsdp(), reduce_output_, reduce_input_.view({-1}), ReduceOp::kSum);
  if (streams_) {
    pending_reduce_.wait();  // NCCL: the reduce-scatter stream waits for NCCL's; the CPU goes on
    reduce_scattered_ = record_event(streams_->reduce_scatter());
  }
  trace_engine("reduce-scatter issued " + name_);
}

void FSDPParamGroup::finish_reduce() {
  if (!reduce_output_.defined()) return;
  torch::NoGradGuard no_grad;
  std::optional<c10::StreamGuard> on_side_stream;
  if (streams_) {
    // The input, allocated on the compute stream, is reused there only after the collective read it.
    reduce_scattered_->block(streams_->current());
    reduce_scattered_.reset();
    on_side_stream.emplace(streams_->reduce_scatter());  // FSDP2's post-reduce runs there too
  } else {
    pending_reduce_.wait();
  }
  reduce_input_.reset();
  if (mesh_.is_hsdp()) all_reduce(mesh_.ddp(), reduce_output_, ReduceOp::kSum).wait();
  trace_engine("reduce-scatter done " + name_);
  reduce_output_.div_(divide_factor_ > 0 ? divide_factor_ : mesh_.data_parallel_size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->requires_grad()) continue;
    params_[i]->accumulate_sharded_grad(reduce_output_.narrow(0, offsets_[i], params_[i]->layout().padded_numel()));
  }
  reduce_output_.reset();
}

}  // namespace megacpp::parallel::fsdp
