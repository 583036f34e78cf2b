// A Llama-style decoder whose math matches Hugging Face's LlamaForCausalLM (with
// add_qkv_bias: Qwen2ForCausalLM; with qk_layernorm: Qwen3ForCausalLM), with HF's module names (embed_tokens,
// layers.N.{self_attn{,.q_norm,.k_norm},mlp,input_layernorm,post_attention_layernorm}, norm,
// lm_head) so checkpoints map 1:1 (models/llama/llama_hf.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>

#include "models/language_model.h"
#include "models/layers/attention.h"
#include "models/layers/embedding.h"
#include "models/layers/mlp.h"
#include "models/layers/moe.h"
#include "models/layers/rms_norm.h"
#include "models/llama/llama_config.h"

namespace megacpp::models {

class LlamaDecoderLayer : public parallel::Module {
 public:
  // Layer `layer` of the model (its MLP is a mixture of experts where config.is_moe_layer says).
  // `balance` is the model's load-balancing loss (null for a dense model).
  LlamaDecoderLayer(const LlamaConfig& config, int64_t layer, const at::TensorOptions& options,
                    const std::shared_ptr<LoadBalancingLoss>& balance);

 protected:
  // {hidden [batch, seq, hidden], position_ids?, documents?} -> {hidden}
  Tensors forward_tensors(const Tensors& inputs) override;

 private:
  std::shared_ptr<RMSNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<Attention> self_attn_;
  std::shared_ptr<parallel::Module> mlp_;  // SwiGLUMLP or SparseMoeBlock
};

class LlamaModel : public LanguageModel {
 public:
  // `options` carries the device parameters are created on (torch::kMeta for meta init).
  LlamaModel(const LlamaConfig& config, const at::TensorOptions& options);

  const LlamaConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  bool takes_inputs_embeds() const override { return true; }
  double flops_per_token(int64_t seq_length) const override { return config_.flops_per_token(seq_length); }
  bool takes_packed_documents() const override { return true; }
  bool takes_kv_cache() const override { return true; }  // its layers are models::Attention
  bool takes_labels() const override { return true; }

  // Hugging Face's class names: each layers.N is a LlamaDecoderLayer (MistralDecoderLayer with a
  // sliding window, Qwen2DecoderLayer with q/k/v biases, Qwen3DecoderLayer with qk_layernorm, Qwen3MoeDecoderLayer with experts; the
  // CausalLM's _no_split_modules); embed_tokens is the token embedding; lm_head (untied only)
  // the output.
  std::vector<std::pair<std::string, std::string>> module_classes() const override {
    const char* layer = config_.num_experts > 0     ? "Qwen3MoeDecoderLayer"
                        : config_.qk_layernorm      ? "Qwen3DecoderLayer"
                        : config_.add_qkv_bias      ? "Qwen2DecoderLayer"
                        : config_.sliding_window > 0 ? "MistralDecoderLayer"
                                                    : "LlamaDecoderLayer";
    return {{layer, "layers.{*}"}};
  }
  // Megatron's fused layers, as the Hugging Face modules they hold (an expert's MLP too).
  std::map<std::string, std::vector<std::string>> megatron_module_names() const override {
    return {{"linear_qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
            {"linear_proj", {"self_attn.o_proj"}},
            {"linear_fc1", {"gate_proj", "up_proj"}},
            {"linear_fc2", {"down_proj"}}};
  }
  std::string input_embeddings_path() const override { return "embed_tokens"; }
  std::string output_layer_path() const override { return lm_head_ ? "lm_head" : ""; }
  // Token-wise but for attention, with rotary positions: runs on slices of each sequence.
  std::string ulysses_refusal() const override { return ""; }
  // Built from models::Attention and SwiGLUMLP (experts are refused by apply_tensor_parallel).
  std::string tensor_parallel_refusal() const override { return ""; }
  // Sequence parallelism: sliced after the token embedding, whole again after the final norm.
  SequenceParallelRegion sequence_parallel_region() const override { return {{"embed_tokens"}, "norm"}; }
  // transformers' expert class: each layers.N.mlp.experts.E is a Qwen3MoeMLP.
  std::vector<std::pair<std::string, std::string>> expert_module_classes() const override {
    if (config_.num_experts == 0) return {};
    return {{"Qwen3MoeMLP", "layers.{*}.mlp.experts.{*}"}};
  }
  // With experts: load_balancing_loss (transformers' Qwen3-MoE form, --moe-aux-loss-coeff).
  std::vector<AuxiliaryLoss> auxiliary_losses() const override;
  void set_auxiliary_loss_scale(double backward_scale) override;

 protected:
  // {ids [batch, seq], inputs_embeds? [batch, seq, hidden] (a multimodal model's embeddings, ids
  // then only give the shape), position_ids?, documents?, labels?, loss_mask?} (ModelInput) ->
  // {logits}, or with labels {their summed cross-entropy}.
  Tensors forward_tensors(const Tensors& inputs) override;

 private:
  LlamaConfig config_;
  std::shared_ptr<LoadBalancingLoss> balance_;  // null without experts, or with --moe-router-load-balancing-type none
  std::shared_ptr<Embedding> embed_tokens_;
  torch::nn::ModuleList layers_;
  std::shared_ptr<RMSNorm> norm_;
  std::shared_ptr<Linear> lm_head_;  // null when tied
};

}  // namespace megacpp::models
