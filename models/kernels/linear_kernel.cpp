#include "models/kernels/linear_kernel.h"

#include <torch/torch.h>

#include "models/kernels/fusion.h"

namespace megacpp::models::kernels {
namespace {

at::Tensor wide(const at::Tensor& t) { return t.to(torch::kFloat); }

struct Fp32ProductLinear : torch::autograd::Function<Fp32ProductLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& bias) {
    ctx->save_for_backward({input, weight});
    return torch::linear(wide(input), wide(weight), wide(bias)).to(input.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const int64_t in = weight.size(1), out = weight.size(0);
    const at::Tensor g = grads[0].to(torch::kFloat).reshape({-1, out});
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) grad_input = g.mm(wide(weight)).to(input.scalar_type()).reshape(input.sizes());
    if (ctx->needs_input_grad(1)) grad_weight = g.t().mm(wide(input).reshape({-1, in})).to(weight.scalar_type());
    if (ctx->needs_input_grad(2)) grad_bias = g.sum(0).to(weight.scalar_type());
    return {grad_input, grad_weight, grad_bias};
  }
};

bool low_precision(const at::Tensor& t, c10::ScalarType type) {
  return !t.defined() || (fusable(t) && t.scalar_type() == type);
}

}  // namespace

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const auto type = input.scalar_type();
  if (kernel_fusion().linear && (type == c10::kBFloat16 || type == c10::kHalf) && fusable(input) && low_precision(weight, type) &&
      low_precision(bias, type) && input.dim() >= 1) {
    // libtorch 1.13's Function::apply takes no undefined tensor: no bias is a bias of zeros,
    // which needs no gradient and changes no sum.
    return Fp32ProductLinear::apply(input, weight, bias.defined() ? bias : torch::zeros({weight.size(0)}, weight.options()));
  }
  return torch::linear(input, weight, bias);
}

}  // namespace megacpp::models::kernels
