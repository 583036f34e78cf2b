#include "models/language_model.h"

#include <torch/torch.h>

#include "models/layers/chunked_cross_entropy.h"

namespace megacpp::models {

at::Tensor LanguageModel::chunked_loss(const at::Tensor& hidden, const Tensors& inputs, const std::shared_ptr<parallel::Module>& output,
                                       const at::Tensor& tied_weight) const {
  TORCH_CHECK(loss_chunk_size_ > 0, name(), " was given labels without a loss chunk size (--loss-compute-mode chunk)");
  const at::Tensor flat = hidden.reshape({-1, hidden.size(-1)});
  const at::Tensor labels = inputs[kLabels].reshape({-1});
  TORCH_CHECK(labels.numel() == flat.size(0), name(), ": ", labels.numel(), " labels for ", flat.size(0), " tokens");
  const at::Tensor mask = inputs.size() > kLossMask && inputs[kLossMask].defined() ? inputs[kLossMask].reshape({-1}) : at::Tensor();
  if (output) return (*output)(Tensors{flat, labels, mask, torch::scalar_tensor(loss_chunk_size_, torch::kLong)})[0];
  return chunked_linear_cross_entropy(flat, tied_weight, labels, mask, loss_chunk_size_);
}

}  // namespace megacpp::models
