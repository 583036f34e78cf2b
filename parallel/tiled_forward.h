// Note [Tiled forward]
// ROLL's TiledMLP (from ArcticTraining): a module that acts on each token alone (an MLP) runs
// over tiles of its input along the sequence, each tile recomputed (Note [Recompute]): only
// the module's input is kept for backward, and the intermediate activations of one tile at a
// time exist, in forward and in backward (an MLP's [tokens, ffn] activations shrink by about
// the tile count). The tiles' outputs are concatenated, so outputs and gradients are those of
// one call on the whole input.
#pragma once

#include <cstdint>

namespace megacpp::parallel {

class Module;

// Runs `module` over `tiles` tiles of its inputs along `dim` (each input is cut; an input
// shorter than `tiles` along it runs whole). Composes with recompute (add_forward_wrapper).
void enable_tiled_forward(Module& module, int tiles, int64_t dim);

}  // namespace megacpp::parallel
