// Note [Ulysses]
// DeepSpeed-Ulysses sequence parallelism: the ranks of a Ulysses group each hold a contiguous
// slice of every sequence, and attention, the one place tokens meet, trades that split for a
// split over heads: an all-to-all turns [batch, seq/p, heads*d] into [batch, seq, heads/p*d]
// before it, and the inverse turns the result back after. Between the two, a rank sees the
// whole sequence for its heads, so rotary positions and the causal mask are those of one rank.
// Both all-to-alls are autograd functions whose backward is the other one.
//
// What is split where is the model's to say (FSDP2Mixin::ulysses_refusal, models/
// long_context.h); this layer only moves tensors: after a module's output (the q, k and
// v projections) and before a module's input (the output projection).
#pragma once

#include <ATen/core/Tensor.h>

#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel {

// x [batch, seq/p, heads*d] (this rank's slice of the sequence, every head) ->
// [batch, seq, heads/p*d] (the whole sequence, this rank's p-th of the heads). Differentiable.
at::Tensor sequence_to_heads(const at::Tensor& x, const Group& group);
// The inverse: [batch, seq, heads/p*d] -> [batch, seq/p, heads*d]. Differentiable.
at::Tensor heads_to_sequence(const at::Tensor& x, const Group& group);

// A post-hook on `module` turning its one output from sequence- to head-split.
void split_output_by_heads(Module& module, const Group& group);
// A pre-hook on `module` turning its one input from head- to sequence-split.
void split_input_by_sequence(Module& module, const Group& group);

// This rank's slice [rank * n / p, (rank + 1) * n / p) of `x` along `dim` (n = x.size(dim)).
at::Tensor sequence_slice(const at::Tensor& x, int64_t dim, const Group& group);

}  // namespace megacpp::parallel
