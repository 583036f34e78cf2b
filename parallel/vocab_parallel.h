// Note [Vocabulary parallelism]
// Megatron's vocabulary-parallel embedding, output layer and cross-entropy beside tensor
// parallelism (Note [Tensor parallelism]): the ranks of a TP group each hold an equal, contiguous
// slice of the vocabulary's rows of the token embedding and of the output layer, so neither is
// replicated and no rank materializes the whole logits of a step.
//   embedding     each rank looks up the ids of its rows (the others read as zeros) and the
//                 group sums the vectors (all-reduce; with sequence parallelism a
//                 reduce-scatter along the sequence); backward: each rank's rows get their
//                 gradient from the whole output gradient.
//   output layer  column-parallel by vocabulary: each rank computes the logits of its slice
//                 [..., vocab / p] from the whole hidden states, whose gradient (a partial sum,
//                 one per slice) is all-reduced where the output layer's input is made (with
//                 sequence parallelism: the all-gather of the sequence, reduce-scattered back).
//   cross-entropy vocab_parallel_cross_entropy: the maximum, the sum of exponentials and the
//                 label's logit are reduced over the group (three all-reduces of [tokens]); the
//                 gradient of the rank's logits is its slice of softmax - one_hot.
// A tied output layer is the embedding's slice read as a linear layer: the same split.
//
// Whoever reads the logits as a whole (generation, scoring, Hugging Face checks) gets them
// gathered: a model's logits are all-gathered along the vocabulary after its forward, except
// while a KeepLogitsSplit lives on the thread (the training loss, which reads the slices with
// vocab_parallel_cross_entropy).
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel {

// Splits the token embedding `embedding`'s parameter `slot` [vocab, hidden] by rows over `group`
// (vocab must divide by its size: the caller checks, naming it) and hooks its forward as above:
// the ids [...] it is given are the whole vocabulary's, its output [..., hidden] summed over the
// group, or with `scatter_sequence` ([batch, seq, hidden]) reduce-scattered into this rank's slice
// of each sequence (Note [Sequence parallelism]).
void split_vocab_embedding(Module& embedding, const std::string& slot, const Group& group, bool scatter_sequence);

// Hooks on `model` (the root), whose vocabulary is split over `group`: its first output, logits
// [..., vocab / p] of this rank's slice, is all-gathered along the last dimension unless a
// KeepLogitsSplit lives on this thread (a summed loss, 0-dim, is left as it is); while its
// forward runs, vocab_parallel_group() is `group` (and what it was before once the forward ends,
// also by an exception).
void split_model_vocabulary(Module& model, const Group& group);

// The vocabulary group of the model whose forward runs on this thread (its output layer computes
// this rank's slice of the logits), or null: what the chunked loss reads (Note [Chunked loss]).
const Group* vocab_parallel_group();

// While one lives, the models of this thread give their rank's slice of the logits.
class KeepLogitsSplit {
 public:
  KeepLogitsSplit();
  ~KeepLogitsSplit();
  KeepLogitsSplit(const KeepLogitsSplit&) = delete;
  KeepLogitsSplit& operator=(const KeepLogitsSplit&) = delete;

 private:
  bool before_;
};

// The cross-entropy of each label [tokens] (int64 ids of the whole vocabulary) given this rank's
// slice of the logits [tokens, vocab / p] (slices in group-rank order), in fp32: the same on
// every rank of `group`. Differentiable in the logits (collective in forward only).
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, const Group& group);
// The same, not differentiable, for fp32 or fp64 logits; with `grad` also its gradient towards
// the slice, softmax - one_hot(label) (the one-hot on the rank holding the label).
at::Tensor vocab_parallel_cross_entropy_with_grad(const at::Tensor& logits, const at::Tensor& labels, const Group& group,
                                                  at::Tensor* grad);

}  // namespace megacpp::parallel
