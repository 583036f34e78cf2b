#pragma once

#include <memory>

#include "models/layers/linear.h"

namespace megacpp::models {

// SwiGLU: down(silu(gate(x)) * up(x)).
class SwiGLUMLP : public parallel::Module {
 public:
  SwiGLUMLP(int64_t hidden_size, int64_t ffn_hidden_size, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;

 private:
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
};

}  // namespace megacpp::models
