// A GPT-2 style decoder, deliberately not Llama-shaped: learned position embeddings,
// LayerNorm with bias, GELU MLP, biases on every Linear, output tied to the token embedding.
// Module names follow Hugging Face's GPT2Model (wte, wpe, h.N.{ln_1,attn.c_attn,attn.c_proj,
// ln_2,mlp.c_fc,mlp.c_proj}, ln_f), so weights map 1:1 (gpt2_family.cpp).
#pragma once

#include <memory>

#include <torch/nn/modules/container/modulelist.h>

#include <models/language_model.h>
#include <models/layers/embedding.h>
#include <models/layers/linear.h>

#include "gpt2_config.h"

namespace gpt2 {

// (x - mean) / sqrt(var + eps) * weight + bias.
class LayerNorm : public megacpp::parallel::Module {
 public:
  LayerNorm(int64_t dim, double eps, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& x) override;

 private:
  double eps_;
  at::Tensor weight_, bias_;  // [dim]
};

class Gpt2Block : public megacpp::parallel::Module {
 public:
  Gpt2Block(const Gpt2Config& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;  // [batch, seq, hidden]

 private:
  int64_t head_dim_;
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<megacpp::models::Linear> c_attn_, attn_proj_, c_fc_, mlp_proj_;
};

class Gpt2Model : public megacpp::models::LanguageModel {
 public:
  Gpt2Model(const Gpt2Config& config, const at::TensorOptions& options);

  int64_t vocab_size() const override { return config_.vocab_size; }
  double flops_per_token(int64_t seq_length) const override;
  // Hugging Face's class name of each block, for wrap_policy.transformer_layer_cls_to_wrap.
  std::vector<std::pair<std::string, std::string>> module_classes() const override {
    return {{"GPT2Block", "h.{*}"}};
  }
  std::string input_embeddings_path() const override { return "wte"; }
  // Tensor parallelism (--tensor-model-parallel-size): its Linear layers split by the plan, the
  // blocks read their head count and sequence from c_attn's output, and --sequence-parallel
  // splits each sequence after the embeddings and gathers it after ln_f.
  std::string tensor_parallel_refusal() const override { return ""; }
  std::vector<megacpp::models::TensorParallelLinear> tensor_parallel_plan() const override;
  megacpp::models::SequenceParallelRegion sequence_parallel_region() const override { return {{"wte", "wpe"}, "ln_f"}; }

 protected:
  at::Tensor forward(const at::Tensor& ids) override;
  // LayerNorm is not a megacpp layer: weight 1, bias 0.
  bool init_module(const std::string& path, megacpp::parallel::Module& module, double std, uint64_t seed) override;

 private:
  Gpt2Config config_;
  std::shared_ptr<megacpp::models::Embedding> wte_, wpe_;
  torch::nn::ModuleList h_;
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace gpt2
