// Freezing part of a model (ROLL's model_args.freeze_module_prefix, --freeze-module-prefix):
// every parameter under one of the given module paths stops requiring gradients before the
// model is sharded, so under FSDP2 it is gathered for compute but never reduced, and holds no
// gradient and no optimizer state (as LoRA's base, Note [LoRA]).
#pragma once

#include <string>
#include <vector>

#include "models/language_model.h"

namespace megacpp::models {

// Freezes the parameters whose path (megacpp's module path, e.g. layers.0 or embed_tokens) is a
// prefix or lies under it ("layers.0" freezes layers.0.*; unlike ROLL's plain startswith,
// "layers.1" does not freeze layers.10; a trailing "." is ignored). Throws std::invalid_argument
// naming a prefix that matches no parameter (listing the model's top-level modules), or when
// nothing is left to train.
void freeze_module_prefixes(LanguageModel& model, const std::vector<std::string>& prefixes);

}  // namespace megacpp::models
