// Note [Module hooks]
// C++ modules have no forward hooks, so megacpp layers derive from this Module: its call
// operator runs pre-hooks, an optional forward wrapper (activation recompute) and post-hooks
// around `forward`. Hooks see a module's inputs and outputs as lists of tensors: a module
// with one tensor in and out overrides forward(const at::Tensor&); one with several (token
// ids and image features in, logits and an auxiliary loss out) overrides forward_tensors.
// An undefined tensor in a list is an optional input or output left out. Parameters live in *slots*: members the forward reads, which an engine
// may point at other tensors (FSDP points them at gathered, unsharded tensors during compute
// and back at the sharded masters afterwards) without the layer's code knowing.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include <torch/nn/module.h>

namespace megacpp::parallel {

class Module : public torch::nn::Module {
 public:
  using Tensors = std::vector<at::Tensor>;
  using Forward = std::function<Tensors(const Tensors&)>;
  // May replace the inputs (e.g. cast them); returns the inputs forward will see.
  using PreHook = std::function<Tensors(Module&, const Tensors& inputs)>;
  // May replace the outputs; returns what the caller will see.
  using PostHook = std::function<Tensors(Module&, const Tensors& inputs, const Tensors& outputs)>;
  // Runs `forward` on `inputs` its own way (e.g. without saving activations).
  using ForwardWrapper = std::function<Tensors(const Forward& forward, const Tensors& inputs)>;

  struct ParamSlot {
    std::string name;    // local name, as registered with torch::nn::Module
    at::Tensor* member;  // the member that forward reads
  };

  explicit Module(std::string name = "Module") : torch::nn::Module(std::move(name)) {}
  Module(const Module&) = delete;  // slots point into this object
  Module& operator=(const Module&) = delete;

  // The call with hooks: what a parent calls instead of forward.
  Tensors operator()(const Tensors& inputs);
  // The one-tensor form; throws when forward gives other than one output.
  at::Tensor operator()(const at::Tensor& input);

  void add_pre_hook(PreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  void add_post_hook(PostHook hook) { post_hooks_.push_back(std::move(hook)); }
  // Wrappers compose: the last one added runs outermost, around the earlier ones (recompute
  // around a tiled forward).
  void add_forward_wrapper(ForwardWrapper wrapper);

  const std::vector<ParamSlot>& param_slots() const { return slots_; }
  // The slot named `name`; throws std::out_of_range naming the module and the slot.
  const ParamSlot& param_slot(const std::string& name) const;
  // Points the slot's member and torch's parameter registry at `value`.
  void replace_parameter(const std::string& name, const at::Tensor& value);
  // Points only the member at `value` (a compute view); the registry keeps its tensor.
  void set_compute_tensor(const std::string& name, const at::Tensor& value);

  // Engines attach their per-module state here (one object per type).
  template <class T>
  T* attachment() const {
    auto it = attachments_.find(typeid(T));
    return it == attachments_.end() ? nullptr : static_cast<T*>(it->second.get());
  }
  template <class T>
  void attach(std::shared_ptr<T> value) {
    attachments_[typeid(T)] = std::move(value);
  }

 protected:
  // Override one of the two. forward_tensors' default calls forward with the one input.
  virtual Tensors forward_tensors(const Tensors& inputs);
  virtual at::Tensor forward(const at::Tensor& input);

  // Registers `value` as parameter `name` and makes `member` its slot.
  void register_slot(const std::string& name, at::Tensor& member, at::Tensor value,
                     bool requires_grad = true);

 private:
  std::vector<ParamSlot> slots_;
  std::vector<PreHook> pre_hooks_;
  std::vector<PostHook> post_hooks_;
  ForwardWrapper forward_wrapper_;
  std::unordered_map<std::type_index, std::shared_ptr<void>> attachments_;
};

// Every parallel::Module in `root`'s tree, pre-order, with dotted paths ("" for the root).
std::vector<std::pair<std::string, Module*>> named_hookable_modules(torch::nn::Module& root);

// The slot rule: a parallel::Module holds each of its parameters in a slot (register_slot), the
// only way FSDP, recompute and offload can point its forward at another tensor. Throws
// std::invalid_argument naming the first module in `root`'s tree with a parameter registered
// otherwise (torch's register_parameter), the parameter and the fix.
void require_parameters_in_slots(torch::nn::Module& root);

}  // namespace megacpp::parallel
