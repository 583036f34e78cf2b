#include "models/layers/attention.h"

#include <torch/torch.h>

#include "parallel/compat.h"

namespace megacpp::models {

Attention::Attention(int64_t hidden_size, int64_t heads, int64_t kv_heads, double rotary_base,
                     const at::TensorOptions& options)
    : parallel::Module("Attention"),
      heads_(heads),
      kv_heads_(kv_heads),
      head_dim_(hidden_size / heads),
      rotary_(hidden_size / heads, rotary_base) {
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(hidden_size, heads * head_dim_, false, options));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(hidden_size, kv_heads * head_dim_, false, options));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(hidden_size, kv_heads * head_dim_, false, options));
  o_proj_ = register_module("o_proj", std::make_shared<Linear>(heads * head_dim_, hidden_size, false, options));
}

at::Tensor Attention::forward(const at::Tensor& hidden) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1);
  auto split_heads = [&](const at::Tensor& x, int64_t n) {  // [b, s, n*d] -> [b, n, s, d]
    return x.view({batch, seq, n, head_dim_}).transpose(1, 2);
  };
  at::Tensor q = rotary_.apply(split_heads((*q_proj_)(hidden), heads_));
  at::Tensor k = rotary_.apply(split_heads((*k_proj_)(hidden), kv_heads_));
  at::Tensor v = split_heads((*v_proj_)(hidden), kv_heads_);
  if (kv_heads_ != heads_) {  // each key/value head serves heads/kv_heads query heads
    k = k.repeat_interleave(heads_ / kv_heads_, 1);
    v = v.repeat_interleave(heads_ / kv_heads_, 1);
  }
  at::Tensor out = parallel::compat::causal_attention(q, k, v);  // [b, heads, s, d]
  return (*o_proj_)(out.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_}));
}

}  // namespace megacpp::models
