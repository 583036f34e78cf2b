// Note [Tensor-parallel random numbers]
// Megatron's model-parallel RNG tracker, for dropout beside tensor parallelism (Note [Tensor
// parallelism]). Where the ranks of a TP group compute the same thing (the replicated hidden
// states between the blocks), they draw the same random numbers from the default generators,
// in step, so their dropout masks agree. Where each computes its own share (its attention
// heads; with sequence parallelism its slice of every sequence), drawing in step would give
// every share the same mask: one rank's heads dropped as another's. There the ranks draw from
// streams of their own instead.
//
// A forked stream needs no state to carry: entering the region, each rank draws one number r
// from the CPU's default generator (in step over the group), keeps the default generators'
// states, seeds them with r + 2718 + its TP rank (Megatron's offset) and puts the kept states
// back when the region ends. So a recomputed region (Note [Recompute], which restores the
// default generators' states from before the first forward) draws the same r and the same
// masks. In eval mode nothing is drawn.
#pragma once

#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel {

// Hooks around `module`: while it runs in training mode, the default generators of the CPU and
// of its inputs' device draw from this rank's own stream, as above.
void fork_random_numbers(Module& module, const Group& group);

}  // namespace megacpp::parallel
