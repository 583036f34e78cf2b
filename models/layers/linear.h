#pragma once

#include "parallel/module.h"

namespace megacpp::models {

// y = x W^T (+ b). weight [out, in], bias [out].
class Linear : public parallel::Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, const at::TensorOptions& options);
  const at::Tensor& weight() const { return weight_; }
  bool has_bias() const { return bias_.defined(); }

 protected:
  at::Tensor forward(const at::Tensor& input) override;

 private:
  at::Tensor weight_;  // [out, in]
  at::Tensor bias_;    // [out] or undefined
};

}  // namespace megacpp::models
