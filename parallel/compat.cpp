#include "parallel/compat.h"

#include <cmath>

#include <torch/torch.h>

namespace megacpp::parallel::compat {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda()) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true);
  }
#endif
  const int64_t seq = q.size(-2);
  at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor mask = torch::ones({seq, seq}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  at::Tensor probs = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  return torch::matmul(probs, v);
}

}  // namespace megacpp::parallel::compat
