// Activation recompute (checkpointing) for any parallel::Module.
#pragma once

namespace megacpp::parallel {

class Module;

// Makes `module` run its forward without saving activations and re-run it during backward
// (Note [Recompute] in recompute.cpp). The module's hooks stay outside the recomputed region.
void enable_recompute(Module& module);

}  // namespace megacpp::parallel
