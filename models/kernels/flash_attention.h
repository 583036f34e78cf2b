#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// The sequence length from which the layers take it on libtorch 1.13. Recomputing each block's
// scores in backward costs time (megacpp-bench-kernels, forward + backward of 4 heads x 64 against
// the query-row blocks of parallel::compat::causal_attention: 1.33x at 256 tokens, 1.01x at 1024,
// 1.12x at 4096), and what it saves, the [seq, seq] probabilities autograd keeps otherwise (4 B x
// heads x seq^2 / 2 a layer: 134 MB at 4096 tokens and 4 heads), matters only for long sequences.
constexpr int64_t kBlockedAttentionFromSeq = 1024;

// Causal attention in blocks with an online softmax, forward and backward (FlashAttention-2's
// algorithm in libtorch matrix products; Note [Fused kernels]): softmax(q k^T / sqrt(d) + mask) v
// over q, k, v [batch, heads, seq, head_dim] without a [seq, seq] score, probability or mask
// tensor. Key j is hidden from query i when j > i, when `documents` [batch, seq] (undefined:
// one document) differ, or when i - j >= sliding_window (> 0). Blocks of keys wholly after a
// block of queries (or wholly outside its window) are skipped. Saves q, k, v, the output and
// one fp32 log-sum-exp per query for backward, which recomputes each block's probabilities.
// Scores and probabilities in fp32; the products in the tensors' type.
at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& documents,
                                  int64_t sliding_window);

}  // namespace megacpp::models::kernels
