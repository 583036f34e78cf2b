// Note [Chunked loss]
// MindSpeed-LLM's chunk loss (--loss-compute-mode chunk --loss-chunk-size N): the output layer's
// logits [tokens, vocab] are the largest tensor of a language model's step. Computed N tokens at
// a time, each chunk's logits, its loss and at once its gradients (towards the hidden states and
// the output weight) are made and dropped before the next, so at most N tokens' logits exist at a
// time. Beside tensor parallelism (Note [Vocabulary parallelism] in parallel/vocab_parallel.h)
// the weight is this rank's rows of the vocabulary and each chunk's cross-entropy the
// vocabulary-parallel one: N tokens' logits of the rank's slice at a time, three all-reduces of
// [N] per chunk. Backward then only scales the gradients kept: dL/dh [tokens, hidden] and dL/dW [vocab,
// hidden], the size of the hidden states and of the weight. The loss is the same as the whole
// logits give (to float rounding: the sums are taken chunk by chunk).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace megacpp::models {

// sum_i weights[i] * cross_entropy(hidden[i] W^T, labels[i]) over tokens i, for hidden
// [tokens, hidden], weight W [vocab, hidden], labels [tokens] int64, weights [tokens] (a loss
// mask, of any dtype; undefined: every token weighs 1), in chunks of `chunk_size` tokens. The logits are computed in
// the hidden states' dtype and the softmax in fp32, as the whole-logits loss is. Differentiable
// in hidden and weight.
at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                        const at::Tensor& weights, int64_t chunk_size);

}  // namespace megacpp::models
