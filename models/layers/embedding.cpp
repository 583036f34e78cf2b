#include "models/layers/embedding.h"

#include <torch/torch.h>

namespace megacpp::models {

Embedding::Embedding(int64_t vocab_size, int64_t dim, const at::TensorOptions& options)
    : parallel::Module("Embedding") {
  register_slot("weight", weight_, torch::empty({vocab_size, dim}, options));
}

at::Tensor Embedding::forward(const at::Tensor& ids) { return torch::embedding(weight_, ids); }

}  // namespace megacpp::models
