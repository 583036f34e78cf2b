#include "gpt2_model.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace gpt2 {

using megacpp::models::Embedding;
using megacpp::models::Linear;

LayerNorm::LayerNorm(int64_t dim, double eps, const at::TensorOptions& options)
    : megacpp::parallel::Module("LayerNorm"), eps_(eps) {
  register_slot("weight", weight_, torch::empty({dim}, options));
  register_slot("bias", bias_, torch::empty({dim}, options));
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  return torch::layer_norm(x, {x.size(-1)}, weight_, bias_, eps_);
}

Gpt2Block::Gpt2Block(const Gpt2Config& c, const at::TensorOptions& options)
    : megacpp::parallel::Module("GPT2Block"), head_dim_(c.head_dim()) {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(c.hidden_size, c.norm_epsilon, options));
  auto attn = register_module("attn", std::make_shared<megacpp::parallel::Module>("GPT2Attention"));
  c_attn_ = attn->register_module("c_attn", std::make_shared<Linear>(c.hidden_size, 3 * c.hidden_size, true, options));
  attn_proj_ = attn->register_module("c_proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, options));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(c.hidden_size, c.norm_epsilon, options));
  auto mlp = register_module("mlp", std::make_shared<megacpp::parallel::Module>("GPT2MLP"));
  c_fc_ = mlp->register_module("c_fc", std::make_shared<Linear>(c.hidden_size, c.ffn(), true, options));
  mlp_proj_ = mlp->register_module("c_proj", std::make_shared<Linear>(c.ffn(), c.hidden_size, true, options));
}

at::Tensor Gpt2Block::forward(const at::Tensor& hidden) {
  // Causal self-attention: q, k, v from one projection, [batch, heads, seq, head_dim] each. The
  // projection's output gives the shape: with tensor parallelism it holds this rank's heads, and
  // with sequence parallelism the whole sequence of the slice `hidden` holds.
  const at::Tensor projected = (*c_attn_)((*ln_1_)(hidden));
  const int64_t batch = projected.size(0), seq = projected.size(1), heads = projected.size(2) / (3 * head_dim_);
  auto qkv = projected.view({batch, seq, 3, heads, head_dim_}).permute({2, 0, 3, 1, 4});
  at::Tensor scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
  at::Tensor future = torch::ones({seq, seq}, hidden.options().dtype(torch::kBool)).triu(1);
  at::Tensor probs = torch::softmax(scores.masked_fill(future, -std::numeric_limits<float>::infinity()), -1);
  at::Tensor attended = torch::matmul(probs, qkv[2]).transpose(1, 2).reshape({batch, seq, heads * head_dim_});
  at::Tensor h = hidden + (*attn_proj_)(attended);
  // GELU with the tanh approximation (Hugging Face's "gelu_new").
  return h + (*mlp_proj_)(torch::gelu((*c_fc_)((*ln_2_)(h)), "tanh"));
}

Gpt2Model::Gpt2Model(const Gpt2Config& config, const at::TensorOptions& options)
    : megacpp::models::LanguageModel("GPT2LMHeadModel"), config_(config) {
  config_.validate();
  wte_ = register_module("wte", std::make_shared<Embedding>(config.vocab_size, config.hidden_size, options));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(config.max_position_embeddings, config.hidden_size, options));
  h_ = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) h_->push_back(std::make_shared<Gpt2Block>(config, options));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config.hidden_size, config.norm_epsilon, options));
}

// Megatron's split of GPT-2's layer (FSDP2Mixin::tensor_parallel_plan): c_attn column-parallel in
// its three parts [q; k; v], c_fc column-parallel, both c_proj row-parallel.
std::vector<megacpp::models::TensorParallelLinear> Gpt2Model::tensor_parallel_plan() const {
  const int64_t heads = config_.num_attention_heads, ffn = config_.ffn();
  return {{"h.{*}.attn.c_attn", true, 3, heads, "attention heads"},
          {"h.{*}.attn.c_proj", false, 1, heads, "attention heads"},
          {"h.{*}.mlp.c_fc", true, 1, ffn, "FFN columns"},
          {"h.{*}.mlp.c_proj", false, 1, ffn, "FFN columns"}};
}

double Gpt2Model::flops_per_token(int64_t seq_length) const {
  const double h = static_cast<double>(config_.hidden_size);
  const double per_layer = 2.0 * (4 * h * h + 2 * h * config_.ffn()) + 2.0 * 2 * seq_length * h;
  return 3.0 * (config_.num_layers * per_layer + 2.0 * h * config_.vocab_size);
}

at::Tensor Gpt2Model::forward(const at::Tensor& ids) {
  TORCH_CHECK(ids.dim() == 2, "GPT-2 expects token ids [batch, seq], got ", ids.sizes());
  TORCH_CHECK(ids.size(1) <= config_.max_position_embeddings, "sequence of ", ids.size(1),
              " tokens exceeds --max-position-embeddings ", config_.max_position_embeddings);
  at::Tensor positions = torch::arange(ids.size(1), ids.options()).unsqueeze(0);  // wpe's output [1, seq, hidden]
  at::Tensor h = (*wte_)(ids) + (*wpe_)(positions);
  for (auto& block : *h_) h = (*block->as<Gpt2Block>())(h);
  return torch::linear((*ln_f_)(h), wte_->weight());
}

bool Gpt2Model::init_module(const std::string& path, megacpp::parallel::Module& module, double std, uint64_t seed) {
  if (dynamic_cast<LayerNorm*>(&module)) {
    fill_constant(module, "weight", 1.0);
    fill_constant(module, "bias", 0.0);
    return true;
  }
  return LanguageModel::init_module(path, module, std, seed);
}

}  // namespace gpt2
