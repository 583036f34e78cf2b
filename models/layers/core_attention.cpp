#include "models/layers/core_attention.h"

#include <torch/torch.h>

#include "models/kernels/flash_attention.h"
#include "models/kernels/fusion.h"
#include "parallel/compat.h"

namespace megacpp::models {

CoreAttention::CoreAttention(double dropout, int64_t sliding_window)
    : parallel::Module("CoreAttention"), dropout_(dropout), sliding_window_(sliding_window) {
  TORCH_CHECK(sliding_window >= 0, "CoreAttention: the sliding window must be >= 0, got ", sliding_window);
}

parallel::Module::Tensors CoreAttention::forward_tensors(const Tensors& qkv) {
  TORCH_CHECK(qkv.size() == 3 || qkv.size() == 4, "CoreAttention takes q, k, v and optionally the documents, got ", qkv.size(),
              " tensors");
  const int64_t seq = qkv[0].size(-2);
  const bool dropout = is_training() && dropout_ > 0;
  if (TORCH_VERSION_MAJOR < 2 && kernels::kernel_fusion().attention && !dropout && kernels::fusable(qkv[0]) &&
      seq >= kernels::kBlockedAttentionFromSeq) {
    return {kernels::fused_causal_attention(qkv[0], qkv[1], qkv[2], qkv.size() == 4 ? qkv[3] : at::Tensor(), sliding_window_)};
  }
  at::Tensor visible;  // [batch or 1, 1, seq, seq]; undefined: every earlier key
  if (qkv.size() == 4 && qkv[3].defined()) {
    const at::Tensor& documents = qkv[3];  // [batch, seq]
    TORCH_CHECK(documents.dim() == 2 && documents.size(1) == seq, "CoreAttention: documents must be [batch, ", seq, "], got ",
                documents.sizes());
    visible = documents.unsqueeze(2).eq(documents.unsqueeze(1)).unsqueeze(1);
  }
  if (sliding_window_ > 0 && seq > sliding_window_) {
    const at::Tensor positions = torch::arange(seq, qkv[0].options().dtype(torch::kLong));
    const at::Tensor window = (positions.unsqueeze(1) - positions.unsqueeze(0)).lt(sliding_window_).view({1, 1, seq, seq});
    visible = visible.defined() ? visible.logical_and(window) : window;
  }
  return {parallel::compat::causal_attention(qkv[0], qkv[1], qkv[2], dropout ? dropout_ : 0.0, visible)};
}

}  // namespace megacpp::models
