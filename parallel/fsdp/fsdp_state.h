// The state fully_shard attaches to a module: its parameter group and the hooks that gather,
// free and reduce it around forward and backward.
#pragma once

#include <memory>
#include <vector>

#include "parallel/device_mesh.h"
#include "parallel/fsdp/fsdp_param_group.h"
#include "parallel/fsdp/group_reads.h"
#include "parallel/fsdp/options.h"

namespace megacpp::parallel::fsdp {

class FSDPState {
 public:
  FSDPState(Module& module, std::unique_ptr<FSDPParamGroup> group, const DeviceMesh& mesh,
            FullyShardOptions options);

  Module& module() const { return module_; }
  FSDPParamGroup* group() const { return group_.get(); }  // null if the module owns no parameters
  const FullyShardOptions& options() const { return options_; }
  void mark_not_root() { is_root_ = false; }
  bool is_root() const { return is_root_; }
  // Root: every parameter of the tree's groups, by path (Note [Reading another group's parameter]).
  std::vector<GroupParam> group_params();


  void set_forward_prefetch(std::vector<FSDPState*> states) { forward_prefetch_ = std::move(states); }
  void set_backward_prefetch(std::vector<FSDPState*> states) { backward_prefetch_ = std::move(states); }
  void set_requires_gradient_sync(bool sync);  // on every state of the tree
  void set_gradient_divide_factor(double factor);  // on every group of the tree

  // Gathers, casts floating-point inputs (cast_forward_inputs) and hooks the reduction on
  // the inputs that need gradients.
  Module::Tensors pre_forward(const Module::Tensors& inputs);
  // Reshards, casts floating-point outputs (output_dtype) and hooks the gather for backward
  // on the outputs that need gradients.
  Module::Tensors post_forward(const Module::Tensors& outputs);
  void pre_backward();
  void post_backward();  // at most once per backward

 private:
  void lazy_init();
  void queue_final_callback();
  void finalize_backward();  // root: Note [End of backward]
  void reduce_ignored_gradients();
  FSDPState& root() { return root_ ? *root_ : *this; }
  void prefetch_for_backward();  // explicit list, else the group before this one in forward
  void finish_pending_reduce();  // root: waits for the reduce-scatter in flight (Note [Overlap])

  Module& module_;
  std::unique_ptr<FSDPParamGroup> group_;
  const DeviceMesh& mesh_;
  FullyShardOptions options_;
  bool is_root_ = true;
  bool reads_checked_ = false;     // root: its first forward's graph was checked (Note [Reading another group's parameter])
  FSDPState* root_ = nullptr;      // set by the root's lazy_init
  std::vector<FSDPState*> tree_;   // root only
  std::vector<FSDPState*> forward_prefetch_;
  std::vector<FSDPState*> backward_prefetch_;
  bool requires_gradient_sync_ = true;
  bool post_backward_done_ = false;
  bool final_callback_queued_ = false;  // root only
  bool backward_prefetched_ = false;     // this backward's prefetch is issued
  std::vector<size_t> forward_indices_;  // where this state's forwards are in the root's order
  // Root only: the states whose outputs will see a backward, in the order their forwards ended
  // (FSDP2's post_forward_order), whether backward has begun, and the group whose
  // reduce-scatter is in flight.
  std::vector<FSDPState*> post_forward_order_;
  bool in_backward_ = false;
  FSDPParamGroup* reducing_ = nullptr;
};

}  // namespace megacpp::parallel::fsdp
