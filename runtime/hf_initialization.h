// --init-from-hf-path's weights (Note [Hugging Face folders] in settings/hf_model_arguments.h):
// each rank reads its rows of each parameter straight from the folder's mapped safetensors into
// its shard, so no rank holds the whole model.
#pragma once

#include <string>
#include <vector>

#include "models/model_family.h"

namespace megacpp::runtime {

struct ParamSlot;

// Fills `slots` (this rank's rows of each parameter, LoRA adapters left out by the caller) from
// the folder `dir` holding the model `config`. Every tensor is checked (present, its shape,
// its dtype) before any is copied: an error names the file and the tensor and leaves the model
// as it was.
void load_hf_folder(const std::string& dir, const models::ModelConfig& config, const std::vector<ParamSlot>& slots);

}  // namespace megacpp::runtime
