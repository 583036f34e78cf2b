// Note [Job configuration]
// A run's configuration is resolved once, in one call, before any process group exists, as
// torchtitan's JobConfig: the flags, parsed and checked section by section (parse_arguments,
// Note [Flag sections]), then, on the job's launch environment, the FSDP2 YAML merged with the
// flags that set the same things (one rule: a flag and a key that disagree are refused naming
// both; a flag left at its default is the YAML's), the mesh's dimensions resolved on the world,
// and for megacpp-train the batches. From then on it is const: the memory estimate, the
// trainer, megacpp-infer's and megacpp-grpo's runs read the same object and change none of it.
// After resolution a size has one name: dims.cp (from --context-parallel-size or ulysses_size),
// dims.tp, dims.dp_shard and dims.dp_replicate; the flags and keys that gave them are only read
// for messages that name them.
#pragma once

#include <functional>
#include <optional>

#include "parallel/launch_environment.h"
#include "parallel/parallel_dims.h"
#include "settings/batch_plan.h"
#include "settings/fsdp2_config.h"
#include "settings/training_arguments.h"

namespace megacpp::settings {

struct JobConfig {
  TrainingArguments args;      // the flags; --use-torch-fsdp2 on for several ranks, --train-iters resolved
  FSDP2Config fsdp;            // fsdp2_config.yaml merged with the flags
  parallel::LaunchEnvironment launch;  // this process's place in the job
  parallel::ParallelDims dims;         // the mesh's ranks divided
  std::optional<BatchPlan> batches;    // megacpp-train's (JobLayout::plans_batches)
};

// What a program's job is, beside its flags.
struct JobLayout {
  int other_ranks = 0;  // the job's last ranks are not the mesh's (a GRPO job's rollout workers)
  // Changes the config the flags and --fsdp2-config-path give, before the dimensions are resolved
  // (ROLL's actor_train strategy_config in megacpp-grpo).
  std::function<void(FSDP2Config&)> amend;
  bool plans_batches = false;  // megacpp-train: the global batch, its ramp and --train-samples' iterations

  static JobLayout training() {
    JobLayout layout;
    layout.plans_batches = true;
    return layout;
  }
};

// Throws std::invalid_argument naming the flag, key or file at fault (a size that does not divide
// the world, a flag and a key that disagree, a batch that is not whole micro-steps).
JobConfig resolve_job(TrainingArguments args, const parallel::LaunchEnvironment& launch, const JobLayout& layout = {});

}  // namespace megacpp::settings
