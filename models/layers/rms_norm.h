#pragma once

#include "parallel/module.h"

namespace megacpp::models {

// x / sqrt(mean(x^2) + eps) * weight, computed in fp32 as Hugging Face's LlamaRMSNorm.
class RMSNorm : public parallel::Module {
 public:
  RMSNorm(int64_t dim, double eps, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& input) override;

 private:
  double eps_;
  at::Tensor weight_;  // [dim]
};

}  // namespace megacpp::models
