#include "models/gpt/gpt_model.h"

#include <stdexcept>

#include <torch/torch.h>


namespace megacpp::models {

GptBlock::GptBlock(const GptConfig& c, const at::TensorOptions& options)
    : parallel::Module("GPT2Block"),
      head_dim_(c.hidden_size / c.num_attention_heads),
      openai_gelu_(c.openai_gelu),
      hidden_dropout_(c.hidden_dropout) {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(c.hidden_size, c.norm_epsilon, options, c.apply_layernorm_1p));
  auto attn = register_module("attn", std::make_shared<parallel::Module>("GPT2Attention"));
  c_attn_ = attn->register_module("c_attn", std::make_shared<Linear>(c.hidden_size, 3 * c.hidden_size, true, options));
  attn_proj_ = attn->register_module("c_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
  core_attention_ = attn->register_module("core_attention", std::make_shared<CoreAttention>(c.attention_dropout));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(c.hidden_size, c.norm_epsilon, options, c.apply_layernorm_1p));
  auto mlp = register_module("mlp", std::make_shared<parallel::Module>("GPT2MLP"));
  c_fc_ = mlp->register_module("c_fc", std::make_shared<Linear>(c.hidden_size, c.ffn(), true, options));
  mlp_proj_ = mlp->register_module("c_proj", std::make_shared<Linear>(c.ffn(), c.hidden_size, true, options));
}

// Causal multi-head self-attention; q, k and v come from one projection, [q | k | v] along
// its output rows, each split into heads. The projection's output gives the shape (a
// tensor-parallel rank's share of the heads, the whole sequence where its input is a slice).
at::Tensor GptBlock::attention(const at::Tensor& x, const at::Tensor& documents) {
  const at::Tensor projected = (*c_attn_)(x);
  const int64_t batch = projected.size(0), seq = projected.size(1), heads = projected.size(-1) / (3 * head_dim_);
  auto qkv = projected.view({batch, seq, 3, heads, head_dim_}).permute({2, 0, 3, 1, 4});
  at::Tensor out = (*core_attention_)({qkv[0], qkv[1], qkv[2], documents})[0];  // [b, heads, s, d]
  return (*attn_proj_)(out.transpose(1, 2).reshape({batch, seq, heads * head_dim_}));
}

at::Tensor GptBlock::mlp(const at::Tensor& x) {
  return (*mlp_proj_)(torch::gelu((*c_fc_)(x), openai_gelu_ ? "tanh" : "none"));
}

parallel::Module::Tensors GptBlock::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 2, "GPT2Block takes hidden states and documents, got ", inputs.size(), " tensors");
  const at::Tensor& hidden = inputs[0];
  const at::Tensor documents = inputs.size() > 1 ? inputs[1] : at::Tensor();
  at::Tensor h = hidden + torch::dropout(attention((*ln_1_)(hidden), documents), hidden_dropout_, is_training());
  return {h + torch::dropout(mlp((*ln_2_)(h)), hidden_dropout_, is_training())};
}

GptModel::GptModel(const GptConfig& config, const at::TensorOptions& options)
    : LanguageModel("GPT2LMHeadModel"), config_(config) {
  config_.validate();
  wte_ = register_module("wte", std::make_shared<Embedding>(config.vocab_size, config.hidden_size, options));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(config.max_position_embeddings, config.hidden_size, options));
  h_ = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) h_->push_back(std::make_shared<GptBlock>(config, options));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config.hidden_size, config.norm_epsilon, options,
                                                              config.apply_layernorm_1p));
}

std::vector<TensorParallelLinear> GptModel::tensor_parallel_plan() const {
  const int64_t heads = config_.num_attention_heads, ffn = config_.ffn();
  const std::string head_units = "attention heads (--num-attention-heads)", ffn_units = "FFN columns (--ffn-hidden-size)";
  return {{"h.{*}.attn.c_attn", true, 3, heads, head_units},
          {"h.{*}.attn.c_proj", false, 1, heads, head_units},
          {"h.{*}.mlp.c_fc", true, 1, ffn, ffn_units},
          {"h.{*}.mlp.c_proj", false, 1, ffn, ffn_units}};
}

parallel::Module::Tensors GptModel::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 6 && (inputs.size() <= kModelExtra || !inputs[kModelExtra].defined()),
              "GptModel takes token ids, position ids, documents, labels and a loss mask (no embeddings)");
  const at::Tensor& ids = inputs[kTokenIds];
  TORCH_CHECK(ids.dim() == 2, "GptModel expects token ids [batch, seq], got ", ids.sizes());
  TORCH_CHECK(ids.size(1) <= config_.max_position_embeddings, "sequence of ", ids.size(1),
              " tokens exceeds --max-position-embeddings ", config_.max_position_embeddings);
  const bool given = inputs.size() > kPositionIds && inputs[kPositionIds].defined();
  // [1, seq] when not given: wpe's output [1, seq, hidden] has its sequence where the hidden states do.
  const at::Tensor positions = given ? inputs[kPositionIds] : torch::arange(ids.size(1), ids.options()).unsqueeze(0);
  const at::Tensor documents = inputs.size() > kDocumentIds ? inputs[kDocumentIds] : at::Tensor();
  at::Tensor h = torch::dropout((*wte_)(ids) + (*wpe_)(positions), config_.hidden_dropout, is_training());
  for (auto& block : *h_) h = (*block->as<GptBlock>())(Tensors{h, documents})[0];
  h = (*ln_f_)(h);
  if (inputs.size() > kLabels && inputs[kLabels].defined()) return {chunked_loss(h, inputs, nullptr, wte_->weight())};
  return {torch::linear(h, wte_->weight())};
}

}  // namespace megacpp::models
