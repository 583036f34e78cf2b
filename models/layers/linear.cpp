#include "models/layers/linear.h"

#include <torch/torch.h>

namespace megacpp::models {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, const at::TensorOptions& options)
    : parallel::Module("Linear") {
  register_slot("weight", weight_, torch::empty({out_features, in_features}, options));
  if (bias) register_slot("bias", bias_, torch::empty({out_features}, options));
}

at::Tensor Linear::forward(const at::Tensor& input) { return torch::linear(input, weight_, bias_); }

}  // namespace megacpp::models
