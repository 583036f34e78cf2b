#include "models/llava/clip_vision.h"

#include <cmath>

#include <torch/torch.h>

namespace megacpp::models {

ClipAttention::ClipAttention(const ClipVisionConfig& c, const at::TensorOptions& options)
    : parallel::Module("ClipAttention"), heads_(c.num_heads) {
  TORCH_CHECK(c.hidden_size % c.num_heads == 0, "the vision hidden size ", c.hidden_size, " is not a multiple of its ",
              c.num_heads, " heads");
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
}

at::Tensor ClipAttention::forward(const at::Tensor& hidden) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), head_dim = hidden.size(2) / heads_;
  auto heads = [&](Linear& proj) { return proj(hidden).view({batch, seq, heads_, head_dim}).transpose(1, 2); };
  const at::Tensor q = heads(*q_proj_), k = heads(*k_proj_), v = heads(*v_proj_);
  const at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  const auto softmax_type = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const at::Tensor probs = torch::softmax(scores, -1, softmax_type).to(q.scalar_type());
  return (*out_proj_)(torch::matmul(probs, v).transpose(1, 2).reshape({batch, seq, heads_ * head_dim}));
}

ClipMlp::ClipMlp(const ClipVisionConfig& c, const at::TensorOptions& options) : parallel::Module("ClipMlp") {
  fc1_ = register_module("fc1", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, true, options));
  fc2_ = register_module("fc2", std::make_shared<Linear>(c.intermediate_size, c.hidden_size, true, options));
}

at::Tensor ClipMlp::forward(const at::Tensor& hidden) {
  const at::Tensor x = (*fc1_)(hidden);
  return (*fc2_)(x * torch::sigmoid(1.702 * x));
}

ClipEncoderLayer::ClipEncoderLayer(const ClipVisionConfig& c, const at::TensorOptions& options)
    : parallel::Module("ClipEncoderLayer") {
  self_attn_ = register_module("self_attn", std::make_shared<ClipAttention>(c, options));
  layer_norm1_ = register_module("layer_norm1", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, options));
  mlp_ = register_module("mlp", std::make_shared<ClipMlp>(c, options));
  layer_norm2_ = register_module("layer_norm2", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, options));
}

at::Tensor ClipEncoderLayer::forward(const at::Tensor& hidden) {
  const at::Tensor h = hidden + (*self_attn_)((*layer_norm1_)(hidden));
  return h + (*mlp_)((*layer_norm2_)(h));
}

PatchEmbedding::PatchEmbedding(const ClipVisionConfig& c, const at::TensorOptions& options)
    : parallel::Module("PatchEmbedding"), patch_size_(c.patch_size) {
  register_slot("weight", weight_, torch::empty({c.hidden_size, c.num_channels, c.patch_size, c.patch_size}, options));
}

at::Tensor PatchEmbedding::forward(const at::Tensor& pixels) {
  const at::Tensor grid = torch::conv2d(pixels.to(weight_.device(), weight_.scalar_type()), weight_, {}, patch_size_);  // [b, hidden, g, g]
  return grid.flatten(2).transpose(1, 2);  // row-major patches, as Hugging Face
}

ClipVisionEmbeddings::ClipVisionEmbeddings(const ClipVisionConfig& c, const at::TensorOptions& options)
    : parallel::Module("ClipVisionEmbeddings") {
  register_slot("class_embedding", class_embedding_, torch::empty({c.hidden_size}, options));
  patch_embedding_ = register_module("patch_embedding", std::make_shared<PatchEmbedding>(c, options));
  position_embedding_ = register_module("position_embedding", std::make_shared<Embedding>(c.num_positions(), c.hidden_size, options));
}

at::Tensor ClipVisionEmbeddings::forward(const at::Tensor& pixels) {
  const at::Tensor patches = (*patch_embedding_)(pixels);
  const at::Tensor cls = class_embedding_.view({1, 1, -1}).expand({patches.size(0), 1, patches.size(2)});
  const at::Tensor positions = torch::arange(patches.size(1) + 1, patches.options().dtype(torch::kLong));
  return torch::cat({cls, patches}, 1) + (*position_embedding_)(positions);
}

ClipVisionTransformer::ClipVisionTransformer(const ClipVisionConfig& c, int64_t feature_layer, const at::TensorOptions& options)
    : parallel::Module("ClipVisionTransformer"), feature_layer_(feature_layer) {
  TORCH_CHECK(feature_layer >= 0 && feature_layer <= c.num_layers, "vision feature layer ", feature_layer, " is outside 0..",
              c.num_layers);
  embeddings_ = register_module("embeddings", std::make_shared<ClipVisionEmbeddings>(c, options));
  pre_layrnorm_ = register_module("pre_layrnorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, options));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>("ClipEncoder"));
  layers_ = encoder->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) layers_->push_back(std::make_shared<ClipEncoderLayer>(c, options));
  post_layernorm_ = register_module("post_layernorm", std::make_shared<LayerNorm>(c.hidden_size, c.layer_norm_eps, options));
  // What LLaVA's forward never reaches gets no gradient; transformers' AdamW then leaves it as
  // it is, which frozen parameters do here (no weight decay on a zero gradient, no state).
  for (int64_t i = feature_layer; i < c.num_layers; ++i) {
    for (auto& p : layers_[i]->parameters()) p.set_requires_grad(false);
  }
  for (auto& p : post_layernorm_->parameters()) p.set_requires_grad(false);
}

at::Tensor ClipVisionTransformer::forward(const at::Tensor& pixels) {
  at::Tensor h = (*pre_layrnorm_)((*embeddings_)(pixels));
  for (int64_t i = 0; i < feature_layer_; ++i) h = (*layers_[i]->as<ClipEncoderLayer>())(h);
  return h;
}

ClipVisionModel::ClipVisionModel(const ClipVisionConfig& c, int64_t feature_layer, const at::TensorOptions& options)
    : parallel::Module("ClipVisionModel") {
  vision_model_ = register_module("vision_model", std::make_shared<ClipVisionTransformer>(c, feature_layer, options));
}

at::Tensor ClipVisionModel::forward(const at::Tensor& pixels) { return (*vision_model_)(pixels); }

}  // namespace megacpp::models
