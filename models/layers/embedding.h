#pragma once

#include "parallel/module.h"

namespace megacpp::models {

// Token ids [*] -> vectors [*, dim]. weight [vocab, dim].
class Embedding : public parallel::Module {
 public:
  Embedding(int64_t vocab_size, int64_t dim, const at::TensorOptions& options);
  const at::Tensor& weight() const { return weight_; }

 protected:
  at::Tensor forward(const at::Tensor& ids) override;

 private:
  at::Tensor weight_;  // [vocab, dim]
};

}  // namespace megacpp::models
