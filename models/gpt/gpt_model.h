// Megatron's GPT model (GptConfig) with Hugging Face's GPT2LMHeadModel module names (wte, wpe,
// h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}, ln_f), so its weights map to a
// GPT-2 folder 1:1 (gpt_family.cpp). Dropout acts while the model is in training mode.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>

#include "models/gpt/gpt_config.h"
#include "models/language_model.h"
#include "models/layers/core_attention.h"
#include "models/layers/embedding.h"
#include "models/layers/layer_norm.h"
#include "models/layers/linear.h"

namespace megacpp::models {

// Pre-norm block: h += dropout(attention(ln_1(h))); h += dropout(mlp(ln_2(h))).
class GptBlock : public parallel::Module {
 public:
  GptBlock(const GptConfig& config, const at::TensorOptions& options);

 protected:
  // {hidden [batch, seq, hidden], documents?} -> {hidden}
  Tensors forward_tensors(const Tensors& inputs) override;

 private:
  at::Tensor attention(const at::Tensor& x, const at::Tensor& documents);
  at::Tensor mlp(const at::Tensor& x);

  int64_t head_dim_;
  bool openai_gelu_;
  double hidden_dropout_;
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<Linear> c_attn_, attn_proj_, c_fc_, mlp_proj_;
  std::shared_ptr<CoreAttention> core_attention_;  // attn.core_attention, with the attention dropout
};

class GptModel : public LanguageModel {
 public:
  GptModel(const GptConfig& config, const at::TensorOptions& options);

  int64_t vocab_size() const override { return config_.vocab_size; }
  double flops_per_token(int64_t seq_length) const override { return config_.flops_per_token(seq_length); }
  bool takes_packed_documents() const override { return true; }
  bool takes_labels() const override { return true; }
  // Hugging Face's class name of each block, for wrap_policy.transformer_layer_cls_to_wrap.
  std::vector<std::pair<std::string, std::string>> module_classes() const override { return {{"GPT2Block", "h.{*}"}}; }
  // Megatron's layers are GPT-2's (attn.c_proj and mlp.c_proj share a last name).
  std::map<std::string, std::vector<std::string>> megatron_module_names() const override {
    return {{"linear_qkv", {"attn.c_attn"}}, {"linear_proj", {"attn.c_proj"}}, {"linear_fc1", {"mlp.c_fc"}}, {"linear_fc2", {"mlp.c_proj"}}};
  }
  std::string input_embeddings_path() const override { return "wte"; }
  // Megatron's split of GPT's layer: c_attn column-parallel in its three parts [q; k; v] (each
  // rank its heads of each), c_fc column-parallel, both c_proj row-parallel (their biases added
  // once); the attention reads its head count from c_attn's output.
  std::string tensor_parallel_refusal() const override { return ""; }
  std::vector<TensorParallelLinear> tensor_parallel_plan() const override;
  // Each sequence is split after the token and position embeddings (summed, then the embedding
  // dropout) and whole again after ln_f, which the output layer (tied to wte) reads.
  SequenceParallelRegion sequence_parallel_region() const override { return {{"wte", "wpe"}, "ln_f"}; }
  std::string ulysses_refusal() const override {
    return "gpt's learned position embeddings (wpe) are read by each token's place in the whole sequence, and its "
           "attention (c_attn) projects q, k and v together";
  }

 protected:
  // {ids [batch, seq], unused, position_ids?, documents?, labels?, loss_mask?} (ModelInput) ->
  // {logits}, or with labels {their summed cross-entropy}
  Tensors forward_tensors(const Tensors& inputs) override;

 private:
  GptConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  torch::nn::ModuleList h_;
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace megacpp::models
