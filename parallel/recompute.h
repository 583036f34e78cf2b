// Activation recompute (checkpointing) for any parallel::Module.
#pragma once

#include <vector>

#include <ATen/core/Generator.h>

#include "parallel/module.h"

namespace megacpp::parallel {

// Makes `module` run its forward without saving activations and re-run it during backward
// (Note [Recompute] in recompute.cpp). The module's hooks stay outside the recomputed region.
void enable_recompute(Module& module);

// The default generators a forward on `inputs` draws from: the CPU's, and that of the inputs'
// device when it is another.
std::vector<at::Generator> default_generators_for(const Module::Tensors& inputs);

// `forward` on `inputs` as a recomputed module runs it: nothing saved but the inputs.
Module::Tensors run_recomputed(const Module::Forward& forward, const Module::Tensors& inputs);

}  // namespace megacpp::parallel
