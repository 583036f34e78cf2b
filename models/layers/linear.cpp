#include "models/layers/linear.h"

#include <stdexcept>

#include <torch/torch.h>

#include "models/kernels/linear_kernel.h"
#include "models/layers/chunked_cross_entropy.h"

namespace megacpp::models {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, const at::TensorOptions& options)
    : parallel::Module("Linear") {
  register_slot("weight", weight_, torch::empty({out_features, in_features}, options));
  if (bias) register_slot("bias", bias_, torch::empty({out_features}, options));
}

void Linear::add_lora(int64_t rank, double alpha, double dropout) {
  if (lora_A_) throw std::logic_error("Linear::add_lora: this layer has a LoRA adapter already");
  const auto options = weight_.options();
  lora_A_ = register_module("lora_A", std::make_shared<LoraDown>(weight_.size(1), rank, false, options));
  lora_B_ = register_module("lora_B", std::make_shared<LoraUp>(rank, weight_.size(0), false, options));
  lora_scaling_ = alpha / static_cast<double>(rank);
  lora_dropout_ = dropout;
}

parallel::Module::Tensors Linear::forward_tensors(const Tensors& inputs) {
  if (inputs.size() == 1) return {forward(inputs[0])};
  TORCH_CHECK(inputs.size() == 4, "Linear takes its input, or the input, labels, loss mask and chunk size, got ", inputs.size(),
              " tensors");
  TORCH_CHECK(!bias_.defined() && !lora_A_, "the chunked loss (--loss-compute-mode chunk) takes an output layer without a bias or "
              "a LoRA adapter");
  return {chunked_linear_cross_entropy(inputs[0], weight_, inputs[1], inputs[2], inputs[3].item<int64_t>())};
}

at::Tensor Linear::forward(const at::Tensor& input) {
  at::Tensor y = kernels::linear(input, weight_, bias_);
  if (!lora_A_ || !lora_enabled_) return y;
  const at::Tensor x = lora_dropout_ > 0.0 ? torch::dropout(input, lora_dropout_, is_training()) : input;
  return y + (*lora_B_)((*lora_A_)(x)) * lora_scaling_;
}

}  // namespace megacpp::models
