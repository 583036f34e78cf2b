// The sharding_plan pass of parallelize (Note [Parallelize]): which modules of the model's final
// tree become FSDP groups, which are recomputed and which are ignored, from the FSDP2 config.
#pragma once

#include <c10/core/Device.h>

#include "models/sharding_policy.h"
#include "models/language_model.h"
#include "models/parallelize_pass.h"
#include "parallel/device_mesh.h"

namespace megacpp::models {

// The plan for `model` over `mesh` (`wrap` and `recompute` with FSDP2Mixin::resolve_module_classes
// applied).
// Throws std::invalid_argument naming the key at fault: a pattern that matches nothing, a
// selective recompute without core attention, an ignored module on the meta device, or the
// token embedding as its own group while the output layer reads its weight (tied embeddings).
ShardingPlan make_sharding_plan(LanguageModel& model, const parallel::DeviceMesh& mesh, const WrapPolicy& wrap,
                                const RecomputePolicy& recompute, const ShardingPolicy& sharding, c10::Device device);

}  // namespace megacpp::models
