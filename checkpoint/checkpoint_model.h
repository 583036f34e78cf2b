// The model a checkpoint holds, as its `args` describe it (megacpp-convert exports it without
// flags; --use-checkpoint-args trains it).
#pragma once

#include <memory>

#include "checkpoint/checkpoint_reader.h"
#include "models/language_model.h"
#include "models/model_family.h"

namespace megacpp::checkpoint {

// The config of the family the args name (the default family for checkpoints whose args record
// none). Throws naming the checkpoint for args that do not describe a model.
std::shared_ptr<const models::ModelConfig> checkpoint_model(const CheckpointReader& reader);

// That model, whole on the CPU in fp32, with the checkpoint's weights (for inference). Throws
// std::runtime_error naming the checkpoint and a weight it lacks or holds in another shape.
std::shared_ptr<models::LanguageModel> load_checkpoint_model(const CheckpointReader& reader);

}  // namespace megacpp::checkpoint
