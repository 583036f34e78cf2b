// The vision tower of LLaVA: Hugging Face's CLIPVisionModel (modeling_clip.py), with its module
// names (vision_model.{embeddings.{class_embedding, patch_embedding, position_embedding},
// pre_layrnorm, encoder.layers.N.{self_attn.{q,k,v,out}_proj, layer_norm1, mlp.{fc1,fc2},
// layer_norm2}, post_layernorm}). Pre-LayerNorm blocks, bidirectional attention, quick_gelu MLPs.
#pragma once

#include <cstdint>
#include <memory>

#include <torch/nn/modules/container/modulelist.h>

#include "models/layers/embedding.h"
#include "models/layers/layer_norm.h"
#include "models/layers/linear.h"

namespace megacpp::models {

struct ClipVisionConfig {
  int64_t hidden_size = 768;
  int64_t intermediate_size = 3072;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  int64_t num_channels = 3;
  int64_t image_size = 224;
  int64_t patch_size = 32;
  double layer_norm_eps = 1e-5;

  int64_t patches_per_side() const { return image_size / patch_size; }
  int64_t num_positions() const { return patches_per_side() * patches_per_side() + 1; }  // and the class token
};

// CLIPAttention: softmax(q k^T / sqrt(head_dim)) v over all positions (no mask), the softmax in
// fp32; q_proj, k_proj, v_proj, out_proj with biases.
class ClipAttention : public parallel::Module {
 public:
  ClipAttention(const ClipVisionConfig& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;  // [batch, seq, hidden]

 private:
  int64_t heads_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, out_proj_;
};

// CLIPMLP: fc2(quick_gelu(fc1(x))), quick_gelu(x) = x * sigmoid(1.702 x).
class ClipMlp : public parallel::Module {
 public:
  ClipMlp(const ClipVisionConfig& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
};

// CLIPEncoderLayer: h = x + attn(layer_norm1(x)); out = h + mlp(layer_norm2(h)).
class ClipEncoderLayer : public parallel::Module {
 public:
  ClipEncoderLayer(const ClipVisionConfig& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;

 private:
  std::shared_ptr<LayerNorm> layer_norm1_, layer_norm2_;
  std::shared_ptr<ClipAttention> self_attn_;
  std::shared_ptr<ClipMlp> mlp_;
};

// The patch embedding, a Conv2d without bias whose stride is its kernel: weight
// [hidden, channels, patch, patch].
class PatchEmbedding : public parallel::Module {
 public:
  PatchEmbedding(const ClipVisionConfig& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& pixels) override;  // [batch, channels, size, size] -> [batch, patches, hidden]

 private:
  int64_t patch_size_;
  at::Tensor weight_;
};

// CLIPVisionEmbeddings: [class_embedding; patches] + position_embedding(0..patches).
class ClipVisionEmbeddings : public parallel::Module {
 public:
  ClipVisionEmbeddings(const ClipVisionConfig& config, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& pixels) override;  // -> [batch, patches + 1, hidden]

 private:
  at::Tensor class_embedding_;  // [hidden]
  std::shared_ptr<PatchEmbedding> patch_embedding_;
  std::shared_ptr<Embedding> position_embedding_;
};

// CLIPVisionTransformer, run up to `feature_layer`: its output is the hidden state after that
// many encoder layers (transformers' hidden_states[feature_layer]: 0 is the embeddings after
// pre_layrnorm); the layers past it are not run. post_layernorm (of CLIP's pooled output, which
// LLaVA does not use) is kept for the weights' round trip. Both are frozen (requires_grad false).
class ClipVisionTransformer : public parallel::Module {
 public:
  ClipVisionTransformer(const ClipVisionConfig& config, int64_t feature_layer, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& pixels) override;  // [images, channels, size, size]

 private:
  int64_t feature_layer_;
  std::shared_ptr<ClipVisionEmbeddings> embeddings_;
  std::shared_ptr<LayerNorm> pre_layrnorm_, post_layernorm_;  // Hugging Face's spelling
  torch::nn::ModuleList layers_;                               // under "encoder"
};

// CLIPVisionModel: one child, vision_model, as Hugging Face nests it.
class ClipVisionModel : public parallel::Module {
 public:
  ClipVisionModel(const ClipVisionConfig& config, int64_t feature_layer, const at::TensorOptions& options);

  // Hugging Face's CLIPEncoderLayer, for wrapping by class.
  static const char* layer_pattern() { return "vision_model.encoder.layers.{*}"; }

 protected:
  at::Tensor forward(const at::Tensor& pixels) override;

 private:
  std::shared_ptr<ClipVisionTransformer> vision_model_;
};

}  // namespace megacpp::models
