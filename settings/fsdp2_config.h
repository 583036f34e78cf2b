// What fsdp2_config.yaml says (MindSpeed's keys, or ROLL's strategy_config names), with the
// flags that set the same things merged in (settings/fsdp2_config_from_args): the sizes of the
// mesh (settings/parallelism), asynchronous saving, and the sections parallelize takes
// (models/sharding_policy.h, models/parallelize.h).
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "models/sharding_policy.h"

namespace megacpp::settings {

struct FSDP2Config : models::ComparedByFields<FSDP2Config> {
  int sharding_size = -1;  // <= 1 or >= world: full sharding; else HSDP (parallel::ParallelDims)
  // ROLL's ulysses_size (model_args or strategy_config; --context-parallel-size): each sequence
  // is split over this many consecutive ranks (Note [Ulysses] in parallel/ulysses.h).
  int ulysses_size = 1;
  // ROLL's async_save_ckpt (and --async-save): checkpoints are written in the background.
  bool async_save_ckpt = false;
  // ROLL's model_args.freeze_module_prefix (and --freeze-module-prefix): the parameters under
  // these module paths are frozen (models/freeze.h).
  std::vector<std::string> freeze_module_prefix;
  models::ShardingPolicy sharding;
  models::WrapPolicy wrap;
  models::RecomputePolicy recompute;
  models::TiledMlpPolicy tiled_mlp;

  auto fields() const {
    return std::tie(sharding_size, ulysses_size, async_save_ckpt, freeze_module_prefix, sharding, wrap, recompute, tiled_mlp);
  }
};

}  // namespace megacpp::settings
