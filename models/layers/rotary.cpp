#include "models/layers/rotary.h"

#include <algorithm>

#include <torch/torch.h>

#include "models/kernels/fusion.h"
#include "models/kernels/rotary_kernel.h"

namespace megacpp::models {

at::Tensor RotaryEmbedding::apply(const at::Tensor& x, const at::Tensor& position_ids, int64_t positions) const {
  const int64_t seq = x.size(-2), length = std::max(seq, positions);
  if (!cos_.defined() || cos_.size(0) < length || cos_.device() != x.device()) {
    torch::NoGradGuard no_grad;
    auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
    at::Tensor inv_freq = 1.0 / torch::pow(theta_, torch::arange(0, head_dim_, 2, f32) / head_dim_);
    at::Tensor freqs = torch::outer(torch::arange(length, f32), inv_freq);  // [length, head_dim / 2]
    at::Tensor emb = torch::cat({freqs, freqs}, -1);                          // [length, head_dim]
    cos_ = emb.cos();
    sin_ = emb.sin();
  }
  if (position_ids.defined()) {
    TORCH_CHECK(position_ids.dim() == 2 && position_ids.size(1) == seq, "rotary: position_ids must be [batch, ", seq, "], got ",
                position_ids.sizes());
  }
  if (kernels::kernel_fusion().rope && kernels::fusable(x) && x.dim() == 4) {  // [seq or batch x seq, head_dim], fp32
    return position_ids.defined() ? kernels::fused_rotary(x, cos_.index({position_ids}), sin_.index({position_ids}))
                                  : kernels::fused_rotary(x, cos_.narrow(0, 0, seq), sin_.narrow(0, 0, seq));
  }
  at::Tensor cos = cos_.to(x.scalar_type()), sin = sin_.to(x.scalar_type());
  if (!position_ids.defined()) {
    cos = cos.narrow(0, 0, seq);
    sin = sin.narrow(0, 0, seq);
  }
  if (position_ids.defined()) {  // [batch, seq] -> [batch, 1, seq, head_dim], one angle per token and every head
    cos = cos.index({position_ids}).unsqueeze(1);
    sin = sin.index({position_ids}).unsqueeze(1);
  }
  const int64_t half = head_dim_ / 2;
  at::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace megacpp::models
