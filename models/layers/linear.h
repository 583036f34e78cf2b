#pragma once

#include <memory>

#include "parallel/module.h"

namespace megacpp::models {

// y = x W^T (+ b). weight [out, in], bias [out]. With a LoRA adapter (add_lora, PEFT's LoRA):
// y += lora_B(lora_A(dropout(x))) * alpha / rank. An output layer also takes {x [tokens, in],
// labels [tokens], loss_mask [tokens] bool (undefined: all), chunk_size (0-dim int64)} and gives
// {the summed cross-entropy of the counted labels} without making all logits at once (Note
// [Chunked loss]); through the call operator, so that hooks (FSDP's gather) run as for y.
class Linear : public parallel::Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, const at::TensorOptions& options);
  const at::Tensor& weight() const { return weight_; }
  bool has_bias() const { return bias_.defined(); }

  // Adds PEFT's adapter of rank `rank` as children lora_A ([rank, in], a LoraDown) and lora_B
  // ([out, rank], a LoraUp), on the device and in the dtype of the weight. Throws when it has one.
  void add_lora(int64_t rank, double alpha, double dropout);
  bool has_lora() const { return lora_A_ != nullptr; }
  double lora_scaling() const { return lora_scaling_; }
  // Whether the adapter adds to the output (models::AdaptersDisabled turns it off).
  void set_lora_enabled(bool enabled) { lora_enabled_ = enabled; }

 protected:
  Tensors forward_tensors(const Tensors& inputs) override;
  at::Tensor forward(const at::Tensor& input) override;

 private:
  at::Tensor weight_;  // [out, in]
  at::Tensor bias_;    // [out] or undefined
  std::shared_ptr<Linear> lora_A_, lora_B_;
  double lora_scaling_ = 0.0, lora_dropout_ = 0.0;
  bool lora_enabled_ = true;
};

// LoRA's two factors, Linears with PEFT's initialization (WeightInitMixin): the down
// projection lora_A as kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)); the up
// projection lora_B zeros, so that an adapter starts as the identity of the base layer.
class LoraDown : public Linear {
 public:
  using Linear::Linear;
};
class LoraUp : public Linear {
 public:
  using Linear::Linear;
};

}  // namespace megacpp::models
