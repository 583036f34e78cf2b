// Note [Sequence parallelism]
// Megatron's sequence parallelism beside tensor parallelism (Note [Tensor parallelism]): between
// the blocks, where every TP rank would compute the same thing (norms, residual additions), each
// rank of the TP group holds a contiguous slice of every sequence instead. So a block's input is
// all-gathered along the sequence before its column-parallel layers (backward: reduce-scatter of
// the gradient), and its row-parallel output reduce-scattered along the sequence instead of
// all-reduced (backward: all-gather): the same traffic as the all-reduces, and activations
// between the blocks 1/tp the size. The vocabulary-parallel token embedding's partial sums are
// reduce-scattered along the sequence (Note [Vocabulary parallelism]), and the sequence is
// gathered again before the vocabulary-parallel output layer (backward: the reduce-scatter of
// its partial gradients).
//
// A replicated parameter read in the sliced region (the norms) gets a gradient from its rank's
// slice only: the model marks it partial (mark_partial_gradient) and its gradients are summed
// over the group after backward. The token embedding and the output layer run on whole
// sequences. Hidden states are [batch, seq, hidden]: the sequence is dim 1.
#pragma once

#include <ATen/core/Tensor.h>

#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel {

// A pre-hook on `module`: its first input [batch, seq/p, ...] is all-gathered into the whole
// sequence; the gradient is reduce-scattered back.
void gather_input_sequence(Module& module, const Group& group);
// A post-hook on `module`: its one output [batch, seq, ...] of partial sums is reduce-scattered
// into this rank's slice of the sequence; the gradient is all-gathered back.
void reduce_scatter_output_sequence(Module& module, const Group& group);
// A post-hook on `module`: its one output [batch, seq, ...] is cut to this rank's slice; the
// gradient is all-gathered back.
void scatter_output_sequence(Module& module, const Group& group);
// A post-hook on `module`: its one output [batch, seq/p, ...] is all-gathered into the whole
// sequence; the gradient (partial sums, one per rank) is reduce-scattered back.
void gather_output_sequence(Module& module, const Group& group);
// Hooks around `module`, replicated and run on whole sequences on every rank (a mixture-of-experts
// layer, whose load-balancing loss is the whole sequences'): its first input [batch, seq/p, ...]
// is all-gathered and its one output cut to this rank's slice. Every rank then back-propagates
// the same whole gradient through it, so its parameters' gradients are whole and its input's
// gradient is sliced, not summed.
void whole_sequence_inside(Module& module, const Group& group);

}  // namespace megacpp::parallel
