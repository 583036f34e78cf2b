#include "models/layers/attention.h"

#include <torch/torch.h>

#include "models/layers/kv_cache.h"

namespace megacpp::models {

Attention::Attention(const AttentionShape& s, const at::TensorOptions& options)
    : parallel::Module("Attention"),
      heads_(s.heads),
      kv_heads_(s.kv_heads),
      head_dim_(s.head_dim),
      rotary_(s.head_dim, s.rotary_base) {
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(s.hidden_size, heads_ * head_dim_, s.qkv_bias, options));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(s.hidden_size, kv_heads_ * head_dim_, s.qkv_bias, options));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(s.hidden_size, kv_heads_ * head_dim_, s.qkv_bias, options));
  o_proj_ = register_module("o_proj", std::make_shared<Linear>(heads_ * head_dim_, s.hidden_size, false, options));
  if (s.qk_layernorm) {
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(head_dim_, s.norm_epsilon, options, s.zero_centered_gamma));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(head_dim_, s.norm_epsilon, options, s.zero_centered_gamma));
  }
  core_attention_ = register_module("core_attention", std::make_shared<CoreAttention>(0.0, s.sliding_window));
}

parallel::Module::Tensors Attention::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 3, "Attention takes hidden states, position ids and documents, got ",
              inputs.size(), " tensors");
  const at::Tensor& hidden = inputs[0];
  const at::Tensor positions = inputs.size() > 1 ? inputs[1] : at::Tensor();
  const at::Tensor documents = inputs.size() > 2 ? inputs[2] : at::Tensor();
  at::Tensor q_flat = (*q_proj_)(hidden), k_flat = (*k_proj_)(hidden), v_flat = (*v_proj_)(hidden);
  // Shapes are read from the projections, not from `hidden`: with Ulysses sequence parallelism
  // (Note [Ulysses]) they hold the whole sequence and a share of the heads.
  const int64_t batch = q_flat.size(0), seq = q_flat.size(1);
  // [b, s, n*d] -> [b, n, s, d]; the q/k norms act per head on d, before the transpose as in HF.
  auto split_heads = [&](const at::Tensor& x, const std::shared_ptr<RMSNorm>& norm) {
    at::Tensor heads = x.view({batch, seq, -1, head_dim_});
    return (norm ? (*norm)(heads) : heads).transpose(1, 2);
  };
  KvCache* cache = KvCacheScope::active();  // Note [KV cache]
  TORCH_CHECK(!cache || positions.defined(), "Attention with a KV cache needs the new tokens' position ids");
  const int64_t table = cache ? cache->length() : 0;
  at::Tensor q = rotary_.apply(split_heads(q_flat, q_norm_), positions, table);
  at::Tensor k = rotary_.apply(split_heads(k_flat, k_norm_), positions, table);
  at::Tensor v = split_heads(v_flat, nullptr);
  if (cache) {
    KvCache::Entry& entry = cache->entry(this);
    entry.keys = k = entry.keys.defined() ? torch::cat({entry.keys, k}, 2) : k;
    entry.values = v = entry.values.defined() ? torch::cat({entry.values, v}, 2) : v;
  }
  if (kv_heads_ != heads_) {  // each key/value head serves heads/kv_heads query heads
    k = k.repeat_interleave(heads_ / kv_heads_, 1);
    v = v.repeat_interleave(heads_ / kv_heads_, 1);
  }
  at::Tensor out = cache ? cached_attention(q, k, v, cache->documents(), core_attention_->sliding_window())
                         : (*core_attention_)({q, k, v, documents})[0];  // [b, heads, s, d]
  return {(*o_proj_)(out.transpose(1, 2).reshape({batch, seq, -1}))};
}

}  // namespace megacpp::models
