// Note [Recompute]
// The wrapped forward runs under NoGradGuard, so nothing inside the module is saved for
// backward; only the module input is kept. Its output gets a RecomputeBackward node whose
// backward re-runs the forward with grad enabled on a detached copy of the input and
// back-propagates through it with a nested (reentrant) backward call: parameter gradients
// accumulate into the parameters' .grad as usual and the input gradient is returned.
// Hooks registered on the module (FSDP's unshard/reshard) run outside this region, so the
// recomputation sees whatever parameters the pre-backward hooks have gathered.
// The layers megacpp recomputes use no randomness (no dropout), so no RNG state is replayed.
#include "parallel/recompute.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include "parallel/module.h"

namespace megacpp::parallel {
namespace {

class RecomputeBackward : public torch::autograd::Node {
 public:
  RecomputeBackward(Module::Forward forward, at::Tensor input)
      : forward_(std::move(forward)), input_(std::move(input)) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    TORCH_INTERNAL_ASSERT(input_.defined(), "RecomputeBackward ran twice; retain_graph is not supported with recompute");
    at::Tensor input = input_.detach();
    input_.reset();
    const bool input_needs_grad = should_compute_output(0);
    if (input_needs_grad) input.requires_grad_(true);
    at::Tensor output;
    {
      torch::AutoGradMode enable(true);
      output = forward_(input);
    }
    if (grads[0].defined() && output.requires_grad()) {
      torch::autograd::backward({output}, {grads[0]});
    }
    return {input_needs_grad ? input.grad() : at::Tensor()};
  }

  std::string name() const override { return "RecomputeBackward"; }

 private:
  Module::Forward forward_;
  at::Tensor input_;  // [*] the module input, saved in place of all activations
};

at::Tensor recompute_forward(const Module::Forward& forward, const at::Tensor& input) {
  if (!torch::GradMode::is_enabled()) return forward(input);
  at::Tensor output;
  {
    torch::NoGradGuard no_grad;
    output = forward(input);
  }
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(forward, input.detach()),
                                                 torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  at::Tensor result = output.detach();
  torch::autograd::set_history(result, node);
  return result;
}

}  // namespace

void enable_recompute(Module& module) { module.set_forward_wrapper(recompute_forward); }

}  // namespace megacpp::parallel
