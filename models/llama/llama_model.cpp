#include "models/llama/llama_model.h"

#include <stdexcept>

#include <torch/torch.h>

#include "models/kernels/linear_kernel.h"

namespace megacpp::models {

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, int64_t layer, const at::TensorOptions& options,
                                     const std::shared_ptr<LoadBalancingLoss>& balance)
    : parallel::Module("LlamaDecoderLayer") {
  input_layernorm_ = register_module("input_layernorm", std::make_shared<RMSNorm>(config.hidden_size, config.norm_epsilon, options, config.apply_layernorm_1p));
  AttentionShape shape{config.hidden_size, config.num_attention_heads, config.kv_heads(), config.head_dim(),
                       config.rotary_base, config.qk_layernorm, config.norm_epsilon, config.apply_layernorm_1p};
  shape.qkv_bias = config.add_qkv_bias;
  shape.sliding_window = config.sliding_window;
  self_attn_ = register_module("self_attn", std::make_shared<Attention>(shape, options));
  post_attention_layernorm_ = register_module("post_attention_layernorm",
                                              std::make_shared<RMSNorm>(config.hidden_size, config.norm_epsilon, options, config.apply_layernorm_1p));
  if (config.is_moe_layer(layer)) {
    const MoeShape moe{config.hidden_size, config.moe_ffn(), config.num_experts, config.moe_router_topk,
                       config.moe_norm_topk_prob};
    mlp_ = register_module("mlp", std::make_shared<SparseMoeBlock>(moe, options, balance, config.moe_layer_index(layer)));
  } else {
    mlp_ = register_module("mlp", std::make_shared<SwiGLUMLP>(config.hidden_size, config.ffn(), options));
  }
}

parallel::Module::Tensors LlamaDecoderLayer::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 3, "LlamaDecoderLayer takes hidden states, position ids and documents, got ",
              inputs.size(), " tensors");
  Tensors attention_inputs = inputs;
  attention_inputs[0] = (*input_layernorm_)(inputs[0]);
  at::Tensor h = inputs[0] + (*self_attn_)(attention_inputs)[0];
  return {h + (*mlp_)((*post_attention_layernorm_)(h))};
}

LlamaModel::LlamaModel(const LlamaConfig& config, const at::TensorOptions& options)
    : LanguageModel("LlamaModel"), config_(config) {
  config_.validate();
  embed_tokens_ = register_module("embed_tokens", std::make_shared<Embedding>(config.vocab_size, config.hidden_size, options));
  const int64_t moe_layers = config.moe_layer_index(config.num_layers);
  if (moe_layers > 0 && config.moe_load_balancing_type != "none") {
    balance_ = std::make_shared<LoadBalancingLoss>(BalancingLossShape{balancing_loss_named(config.moe_load_balancing_type),
                                                                      config.num_experts, config.moe_router_topk, moe_layers,
                                                                      config.num_layers, config.moe_aux_loss_coeff});
  }
  layers_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers_->push_back(std::make_shared<LlamaDecoderLayer>(config, i, options, balance_));
  }
  norm_ = register_module("norm", std::make_shared<RMSNorm>(config.hidden_size, config.norm_epsilon, options, config.apply_layernorm_1p));
  if (!config.tie_embeddings) {
    lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.hidden_size, config.vocab_size, false, options));
  }
}

parallel::Module::Tensors LlamaModel::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 6, "LlamaModel takes token ids, their embeddings, position ids, "
              "documents, labels and a loss mask, got ", inputs.size(), " tensors");
  const at::Tensor& ids = inputs[0];
  TORCH_CHECK(ids.dim() == 2, "LlamaModel expects token ids [batch, seq], got ", ids.sizes());
  TORCH_CHECK(config_.max_position_embeddings <= 0 || ids.size(1) <= config_.max_position_embeddings,
              "sequence of ", ids.size(1), " tokens exceeds --max-position-embeddings ", config_.max_position_embeddings);
  const bool given = inputs.size() > kModelExtra && inputs[kModelExtra].defined();  // Hugging Face's inputs_embeds
  TORCH_CHECK(!given || (inputs[1].dim() == 3 && inputs[1].size(0) == ids.size(0) && inputs[1].size(1) == ids.size(1) &&
                         inputs[1].size(2) == config_.hidden_size),
              "LlamaModel: inputs_embeds must be [", ids.size(0), ", ", ids.size(1), ", ", config_.hidden_size, "], got ",
              inputs[1].sizes());
  at::Tensor h = given ? inputs[kModelExtra] : (*embed_tokens_)(ids);
  const at::Tensor positions = inputs.size() > kPositionIds ? inputs[kPositionIds] : at::Tensor();
  const at::Tensor documents = inputs.size() > kDocumentIds ? inputs[kDocumentIds] : at::Tensor();
  for (auto& layer : *layers_) h = (*layer->as<LlamaDecoderLayer>())(Tensors{h, positions, documents})[0];
  h = (*norm_)(h);
  if (inputs.size() > kLabels && inputs[kLabels].defined()) return {chunked_loss(h, inputs, lm_head_, embed_tokens_->weight())};
  return {lm_head_ ? (*lm_head_)(h) : models::kernels::linear(h, embed_tokens_->weight())};
}

std::vector<AuxiliaryLoss> LlamaModel::auxiliary_losses() const {
  if (!balance_) return {};
  return {{"load_balancing_loss", balance_->value()}};
}

void LlamaModel::set_auxiliary_loss_scale(double backward_scale) {
  if (balance_) balance_->set_backward_scale(backward_scale);
}

}  // namespace megacpp::models
