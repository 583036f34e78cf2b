#include "models/layers/linear.h"

#include <stdexcept>

#include <torch/torch.h>

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

at::Tensor Linear::forward(const at::Tensor& input) {
  at::Tensor y = torch::linear(input, weight_, bias_);
  if (!lora_A_) return y;
  const at::Tensor x = lora_dropout_ > 0.0 ? torch::dropout(input, lora_dropout_, is_training()) : input;
  return y + (*lora_B_)((*lora_A_)(x)) * lora_scaling_;
}

}  // namespace megacpp::models
