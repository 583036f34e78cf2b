#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::models::kernels {

// The cross-entropy of each row of logits [rows, vocab] (fp32, bf16 or half) against its label
// [rows] (int64): fp32 [rows], log-sum-exp minus the label's logit, in one pass over the row
// (Note [Fused kernels]). A label of -100 (Megatron's and PyTorch's ignore index) gives 0 and no
// gradient; another outside [0, vocab) is an error naming the row. Backward writes
// (softmax - one-hot) * the row's gradient in one pass; saved: the logits and a log-sum-exp per row.
at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace megacpp::models::kernels
