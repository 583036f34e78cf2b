// A model's weights alone, for a run that only computes forwards (megacpp-infer, Note
// [Forward-only sharded inference]): no optimizer state, no progress, no RNG states.
#pragma once

#include "settings/arguments.h"

namespace torch::nn {
class Module;
}

namespace megacpp::parallel {
class DeviceMesh;
}

namespace megacpp::runtime {

// Fills `model` (sharded or not) from the checkpoint under --load (its --ckpt-step, else the
// latest) or, without --load, from --init-from-hf-path's folder, each rank reading only its
// rows. Under LoRA the adapters come from --lora-load when given, else from --load. Throws
// naming the flag when there is nothing to load, a checkpoint of another model (its args or
// tensors) or adapters that are nowhere (they would be uninitialized memory).
void load_model_weights(const settings::TrainingArguments& args, const parallel::DeviceMesh& mesh,
                        torch::nn::Module& model);

}  // namespace megacpp::runtime
