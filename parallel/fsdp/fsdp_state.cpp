// Note [End of backward]
// A group's gradients are reduced by a node inserted on its forward input (its backward runs
// once every gradient inside the group has been computed). A group whose input needs no
// gradient (the embedding's token ids), or that took no part in this backward, never gets
// there; so the root's first pre-backward hook queues a callback on the autograd engine
// (Engine::queue_callback) that runs when the whole backward is done and finalizes every
// group not yet reduced, in reverse pre-order, identically on every rank.
// Note [Overlap]
// As FSDP2 does: a group's reduce-scatter is issued as soon as its backward ends and waited for
// when the next group issues its own (so one is in flight at a time, overlapping the next
// group's backward compute) or at the end of backward. Without an explicit backward prefetch
// list, a group's pre-backward starts the all-gather of the group whose forward ended just
// before its own (FSDP2's implicit backward prefetch, over post_forward_order), so that
// gather overlaps this group's backward too.
#include "parallel/fsdp/fsdp_state.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include <spdlog/spdlog.h>

#include <unordered_map>
#include <unordered_set>

#include "parallel/collectives.h"
#include "parallel/compat.h"
#include "parallel/fsdp/comm_streams.h"
#include "parallel/fsdp/engine_trace.h"

namespace megacpp::parallel::fsdp {
namespace {

// Identity in forward; calls `state->post_backward()` once the gradients of all the inputs
// it was put on are ready.
class PostBackwardNode : public torch::autograd::Node {
 public:
  explicit PostBackwardNode(FSDPState* state) : state_(state) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    state_->post_backward();
    return std::move(grads);
  }
  std::string name() const override { return "FSDPPostBackward"; }

 private:
  FSDPState* state_;
};

// One node for every input that needs a gradient: it runs when all their gradients are in.
Module::Tensors attach_post_backward(const Module::Tensors& inputs, FSDPState* state) {
  if (!torch::GradMode::is_enabled()) return inputs;
  Module::Tensors needing_grad;
  for (const auto& x : inputs) {
    if (x.defined() && x.requires_grad()) needing_grad.push_back(x);
  }
  if (needing_grad.empty()) return inputs;
  auto node = compat::make_autograd_node<PostBackwardNode>(state);
  node->set_next_edges(torch::autograd::collect_next_edges(needing_grad));
  Module::Tensors outputs = inputs;
  for (auto& x : outputs) {
    if (!x.defined() || !x.requires_grad()) continue;
    x = x.detach();
    torch::autograd::set_history(x, node);
  }
  return outputs;
}

bool is_floating(const at::Tensor& t) { return t.defined() && t.is_floating_point(); }

}  // namespace

FSDPState::FSDPState(Module& module, std::unique_ptr<FSDPParamGroup> group,
                     const DeviceMesh& mesh, FullyShardOptions options)
    : module_(module), group_(std::move(group)), mesh_(mesh), options_(std::move(options)) {}

void FSDPState::lazy_init() {
  if (!is_root_ || root_ == this) return;
  tree_.clear();
  for (auto& [path, m] : named_hookable_modules(module_)) {
    if (auto* state = m->attachment<FSDPState>()) {
      state->root_ = this;
      tree_.push_back(state);
    }
  }
  root_ = this;
}

std::vector<GroupParam> FSDPState::group_params() {
  lazy_init();
  std::unordered_map<const Module*, std::string> paths;
  for (const auto& [path, module] : named_hookable_modules(module_)) paths[module] = path;
  std::vector<GroupParam> out;
  for (const auto* state : tree_) {
    if (!state->group_) continue;
    for (const auto& p : state->group_->params()) {
      const FSDPParam::Use& use = p->uses().front();
      const std::string& owner = paths[use.module];
      out.push_back({p.get(), owner.empty() ? use.name : owner + "." + use.name, paths[&state->module_]});
    }
  }
  return out;
}

void FSDPState::set_gradient_divide_factor(double factor) {
  lazy_init();
  for (auto* state : (is_root_ ? tree_ : std::vector<FSDPState*>{this})) {
    if (state->group_) state->group_->set_gradient_divide_factor(factor);
  }
}

void FSDPState::set_requires_gradient_sync(bool sync) {
  lazy_init();
  for (auto* state : (is_root_ ? tree_ : std::vector<FSDPState*>{this})) {
    state->requires_gradient_sync_ = sync;
  }
}

Module::Tensors FSDPState::pre_forward(const Module::Tensors& inputs) {
  if (is_root_) {
    lazy_init();
    for (auto* state : tree_) {
      state->post_backward_done_ = false;
      state->backward_prefetched_ = false;
      state->forward_indices_.clear();
    }
    post_forward_order_.clear();
  }
  if (group_) {
    group_->wait_for_unshard();
    for (auto* next : forward_prefetch_) {
      if (next->group_) next->group_->unshard_async();
    }
  }
  Module::Tensors x = inputs;
  const auto& mp = options_.mixed_precision;
  if (mp.cast_forward_inputs && mp.param_dtype) {
    for (auto& t : x) {
      if (is_floating(t) && t.scalar_type() != *mp.param_dtype) t = t.to(*mp.param_dtype);
    }
  }
  return attach_post_backward(x, this);
}

Module::Tensors FSDPState::post_forward(const Module::Tensors& outputs) {
  if (group_ && !is_root_ && options_.reshard_after_forward) group_->reshard();
  Module::Tensors out = outputs;
  const auto& mp = options_.mixed_precision;
  bool hooked = false;
  for (auto& t : out) {
    if (mp.output_dtype && is_floating(t) && t.scalar_type() != *mp.output_dtype) t = t.to(*mp.output_dtype);
    if (torch::GradMode::is_enabled() && t.defined() && t.requires_grad()) {
      hooked = true;
      t.register_hook([this](const at::Tensor& grad) {
        pre_backward();
        return grad;
      });
    }
  }
  if (is_root_ && !reads_checked_ && torch::GradMode::is_enabled()) {
    reads_checked_ = true;
    check_no_sharded_reads(group_params(), out);
  }
  // Forwards run again by recompute during backward are not part of the order.
  FSDPState& r = root();
  if (hooked && group_ && !is_root_ && !r.in_backward_) {
    forward_indices_.push_back(r.post_forward_order_.size());
    r.post_forward_order_.push_back(this);
  }
  return out;
}

void FSDPState::pre_backward() {
  queue_final_callback();
  // With several outputs this runs once per output; after post_backward the group stays freed.
  if (!group_ || post_backward_done_) return;
  if (!backward_prefetched_) trace_engine("backward " + group_->name());
  group_->wait_for_unshard();
  prefetch_for_backward();
}

void FSDPState::prefetch_for_backward() {
  if (backward_prefetched_) return;
  backward_prefetched_ = true;
  if (!backward_prefetch_.empty()) {
    for (auto* next : backward_prefetch_) {
      // A group already reduced would stay gathered past the optimizer step.
      if (next->group_ && !next->post_backward_done_) next->group_->unshard_async();
    }
    return;
  }
  if (forward_indices_.empty()) return;
  const size_t index = forward_indices_.back();
  forward_indices_.pop_back();
  if (index == 0) return;
  FSDPState* previous = root().post_forward_order_[index - 1];
  if (previous->group_ && !previous->post_backward_done_) previous->group_->unshard_async();
}

void FSDPState::queue_final_callback() {
  FSDPState* root = root_ ? root_ : this;
  if (root->final_callback_queued_) return;
  root->final_callback_queued_ = true;
  root->in_backward_ = true;
  torch::autograd::Engine::get_default_engine().queue_callback([root] { root->finalize_backward(); });
}

void FSDPState::post_backward() {
  if (post_backward_done_) return;
  post_backward_done_ = true;
  if (!group_) return;
  // A group not used in this step still reduces (zeros), so every rank issues the same
  // collectives.
  if (requires_gradient_sync_ && group_->has_trainable_params()) {
    FSDPState& r = root();
    r.finish_pending_reduce();
    group_->reduce_gradients_async();
    r.reducing_ = group_.get();
  }
  group_->reshard();
}

void FSDPState::finish_pending_reduce() {
  if (!reducing_) return;
  reducing_->finish_reduce();
  reducing_ = nullptr;
}

void FSDPState::finalize_backward() {
  final_callback_queued_ = false;
  for (auto it = tree_.rbegin(); it != tree_.rend(); ++it) (*it)->post_backward();
  finish_pending_reduce();
  // Note [Streams]: the reduced gradients were added on the reduce-scatter stream.
  if (auto* streams = CommStreams::for_device(options_.device)) wait_stream(streams->current(), streams->reduce_scatter());
  in_backward_ = false;
  if (requires_gradient_sync_) reduce_ignored_gradients();
}

// Every fully_shard call of the tree carries the ignored parameters of its options (usually
// the same list): each is reduced once.
void FSDPState::reduce_ignored_gradients() {
  std::unordered_set<const c10::TensorImpl*> reduced;
  for (auto* state : tree_) {
    for (const at::Tensor& param : state->options_.ignored_params) {
      if (!param.requires_grad() || !reduced.insert(param.unsafeGetTensorImpl()).second) continue;
      if (!param.grad().defined()) param.mutable_grad() = torch::zeros_like(param);
      all_reduce(mesh_.fsdp(), param.grad(), ReduceOp::kSum).wait();
      if (mesh_.is_hsdp()) all_reduce(mesh_.ddp(), param.grad(), ReduceOp::kSum).wait();
      param.grad().div_(mesh_.data_parallel_size());
    }
  }
}

}  // namespace megacpp::parallel::fsdp
