// Note [Recompute]
// The wrapped forward runs under NoGradGuard, so nothing inside the module is saved for
// backward; only the module inputs are kept. Its floating-point outputs share one
// RecomputeBackward node whose backward re-runs the forward with grad enabled on detached
// copies of the inputs and back-propagates through it with a nested (reentrant) backward
// call: parameter gradients accumulate into the parameters' .grad as usual and the gradients
// of the inputs that need one are returned (inputs that need none, undefined optional inputs
// and integer outputs pass through untouched).
// Hooks registered on the module (FSDP's unshard/reshard) run outside this region, so the
// recomputation sees whatever parameters the pre-backward hooks have gathered.
// A recomputed forward draws the same random numbers (dropout masks) as the first one, as
// torch.utils.checkpoint's preserve_rng_state does: the generator states of the CPU and of the
// inputs' device are saved before the forward, set again for the recomputation, and the
// states the recomputation left are put back afterwards.
#include "parallel/recompute.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include "parallel/compat.h"
#include "parallel/module.h"

namespace megacpp::parallel {
namespace {

using Tensors = Module::Tensors;

bool differentiable(const at::Tensor& t) { return t.defined() && t.is_floating_point(); }

struct RngStates {
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> states;

  static RngStates capture(std::vector<at::Generator> generators) {
    RngStates saved{std::move(generators), {}};
    for (auto& g : saved.generators) {
      std::lock_guard<std::mutex> lock(g.mutex());
      saved.states.push_back(g.get_state());
    }
    return saved;
  }
  void restore() {
    for (size_t i = 0; i < generators.size(); ++i) {
      std::lock_guard<std::mutex> lock(generators[i].mutex());
      generators[i].set_state(states[i]);
    }
  }
};

// Puts the generators back as they were before the recomputation, also when it throws.
struct RestoreOnExit {
  RngStates& states;
  ~RestoreOnExit() { states.restore(); }
};

class RecomputeBackward : public torch::autograd::Node {
 public:
  RecomputeBackward(Module::Forward forward, Tensors inputs, std::vector<size_t> output_slots, RngStates rng)
      : forward_(std::move(forward)),
        inputs_(std::move(inputs)),
        output_slots_(std::move(output_slots)),
        rng_(std::move(rng)) {}

  // grads[k] is the gradient of output output_slots_[k]; returns one gradient per input.
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    TORCH_INTERNAL_ASSERT(!released_, "RecomputeBackward ran twice; retain_graph is not supported with recompute");
    released_ = true;
    Tensors inputs = std::move(inputs_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) continue;
      inputs[i] = inputs[i].detach();
      if (should_compute_output(i)) inputs[i].requires_grad_(true);
    }
    Tensors outputs;
    {
      RngStates now = RngStates::capture(rng_.generators);
      rng_.restore();
      RestoreOnExit put_back{now};
      torch::AutoGradMode enable(true);
      outputs = forward_(inputs);
    }
    Tensors roots, root_grads;
    for (size_t k = 0; k < output_slots_.size(); ++k) {
      const at::Tensor& out = outputs.at(output_slots_[k]);
      if (grads[k].defined() && out.requires_grad()) roots.push_back(out), root_grads.push_back(grads[k]);
    }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);
    torch::autograd::variable_list input_grads(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && should_compute_output(i)) input_grads[i] = inputs[i].grad();
    }
    return input_grads;
  }

  std::string name() const override { return "RecomputeBackward"; }

 private:
  Module::Forward forward_;
  Tensors inputs_;                    // the module inputs, saved in place of all activations
  std::vector<size_t> output_slots_;  // which outputs have this node as grad_fn
  RngStates rng_;                     // the generators' states before the first forward
  bool released_ = false;
};

}  // namespace

std::vector<at::Generator> default_generators_for(const Tensors& inputs) {
  std::vector<at::Generator> generators{at::globalContext().defaultGenerator(c10::Device(c10::kCPU))};
  for (const auto& x : inputs) {
    if (x.defined() && !x.is_cpu() && !x.is_meta()) {
      generators.push_back(at::globalContext().defaultGenerator(x.device()));
      break;
    }
  }
  return generators;
}

Tensors run_recomputed(const Module::Forward& forward, const Tensors& inputs) {
  if (!torch::GradMode::is_enabled()) return forward(inputs);
  RngStates rng = RngStates::capture(default_generators_for(inputs));
  Tensors outputs;
  {
    torch::NoGradGuard no_grad;
    outputs = forward(inputs);
  }
  Tensors saved;
  for (const auto& x : inputs) saved.push_back(x.defined() ? x.detach() : x);
  std::vector<size_t> slots;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (differentiable(outputs[k])) slots.push_back(k);
  }
  auto node = compat::make_autograd_node<RecomputeBackward>(forward, std::move(saved), slots, std::move(rng));
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  Tensors results = outputs;
  for (size_t k : slots) {
    results[k] = outputs[k].detach();
    torch::autograd::set_history(results[k], node);
  }
  return results;
}

void enable_recompute(Module& module) { module.add_forward_wrapper(run_recomputed); }

}  // namespace megacpp::parallel
