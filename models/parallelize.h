// Note [Parallelize]
// parallelize turns a built model into the one that is trained, by passes in one fixed order
// (torchtitan's parallelize_fn; each pass is logged when it does something):
//   lora              adapters on the targeted Linears, the rest frozen (Note [LoRA])
//   freeze            freeze_module_prefix (models/freeze.h)
//   ulysses           attention split by heads over the mesh's Ulysses group (models/long_context.h)
//   tensor_parallel   attention and MLPs split over the mesh's TP group (models/tensor_parallel.h)
//   tiled_mlp         dense MLPs run tile by tile (models/long_context.h)
//   initialize_full   the weights initialized, when the model holds them (not on the meta device)
//   sharding_plan     which modules are groups, recomputed, ignored (the final module tree)
//   recompute         activation recompute on the planned modules
//   expert_patch      every expert runs each micro-batch (needed to wrap experts one by one)
//   fully_shard       each group in post-order, then the root
//   prefetch          forward / backward prefetch lists
//   initialize_shards the weights initialized, once their shards exist (meta-device models)
// The model passes come first because they change which modules and parameters exist and which
// train; the sharding passes then see the final tree. Without FSDP2 (settings.shard false)
// only the model passes and initialize_full run. A family changes the list through
// FSDP2Mixin::parallelize_passes: it may add a pass (a check of the plan before fully_shard, as
// LLaVA's), replace or drop one by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "models/sharding_policy.h"
#include "models/language_model.h"
#include "models/lora.h"
#include "models/parallelize_pass.h"
#include "parallel/device_mesh.h"

namespace megacpp::models {

// What parallelize is asked to do, already read and checked (settings/).
struct ParallelizeSettings {
  LoraSettings lora;                      // rank 0: no LoRA
  std::vector<std::string> freeze_module_prefix;  // models/freeze.h
  TiledMlpPolicy tiled_mlp;
  WrapPolicy wrap;
  RecomputePolicy recompute;
  ShardingPolicy sharding;
  bool shard = true;                      // --use-torch-fsdp2: the sharding passes run
  c10::Device device = c10::kCPU;         // where the shards live
  std::string cp_setting = "ulysses_size";  // how the context-parallel (Ulysses) size was given, for messages
  std::string tensor_parallel_setting = "tensor_parallel_size";  // how the TP size was given, for messages
  bool sequence_parallel = false;         // --sequence-parallel beside TP (Note [Sequence parallelism])
  std::function<void()> initialize;       // the weights' initialization; none: left as allocated
};

// What the passes share.
struct Parallelization {
  LanguageModel& model;
  const parallel::DeviceMesh& mesh;
  const ParallelizeSettings& settings;
  ShardingPlan plan;   // filled by sharding_plan
  bool meta_weights = false;  // the model was built on the meta device (--init-model-with-meta-device)

  // The megacpp parallel::Module at `path` ("" is the model). Throws std::invalid_argument
  // naming the path when there is none there.
  parallel::Module& module(const std::string& path);
};

// The passes above, in their order.
std::vector<ParallelizePass> default_passes();

// Runs model.parallelize_passes(default_passes()) in order; returns the sharding plan (empty
// without FSDP2). Throws std::invalid_argument naming the setting at fault.
ShardingPlan parallelize(LanguageModel& model, const parallel::DeviceMesh& mesh, const ParallelizeSettings& settings);

}  // namespace megacpp::models
