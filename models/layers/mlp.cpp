#include "models/layers/mlp.h"

#include <torch/torch.h>

#include "models/kernels/fusion.h"
#include "models/kernels/swiglu_kernel.h"

namespace megacpp::models {

SwiGLUMLP::SwiGLUMLP(int64_t hidden_size, int64_t ffn_hidden_size, const at::TensorOptions& options)
    : parallel::Module("SwiGLUMLP") {
  gate_proj_ = register_module("gate_proj", std::make_shared<Linear>(hidden_size, ffn_hidden_size, false, options));
  up_proj_ = register_module("up_proj", std::make_shared<Linear>(hidden_size, ffn_hidden_size, false, options));
  down_proj_ = register_module("down_proj", std::make_shared<Linear>(ffn_hidden_size, hidden_size, false, options));
}

at::Tensor SwiGLUMLP::forward(const at::Tensor& hidden) {
  const at::Tensor gate = (*gate_proj_)(hidden), up = (*up_proj_)(hidden);
  if (kernels::kernel_fusion().swiglu && kernels::fusable(gate) && gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type()) {
    return (*down_proj_)(kernels::fused_swiglu(gate, up));
  }
  return (*down_proj_)(torch::silu(gate) * up);
}

}  // namespace megacpp::models
