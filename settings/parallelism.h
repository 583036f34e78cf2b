// The parallelism section: how a run divides its ranks. The Ulysses size comes from Megatron's
// --context-parallel-size or the FSDP2 YAML's ulysses_size (ROLL), the sharding size from the
// YAML's sharding_size / fsdp_size; both are checked here, once, and the run's ParallelDims are
// resolved from them against the world size before any process group exists. What parallelize
// does to the model (models/parallelize.h) is taken from the flags and the YAML here too.
#pragma once

#include <chrono>
#include <string>

#include "models/parallelize.h"
#include "parallel/parallel_dims.h"
#include "settings/arguments.h"
#include "settings/fsdp2_config.h"

namespace megacpp::settings {

// Checks the Ulysses size of a merged config (--context-parallel-size was the YAML's default):
// MindSpeed's ulysses_cp_algo only, FSDP2 on, flag and YAML agreeing, and --seq-length dividing
// by it; the one place it is checked (the parallel section reads the flag). Called by
// fsdp2_config_from_args once it has merged the flags into the YAML.
void check_context_parallel(const TrainingArguments& args, const FSDP2Config& config);

// The Ulysses size as it was given, for messages: "--context-parallel-size 2" or
// "ulysses_size 2 in FILE".
std::string cp_setting(const TrainingArguments& args, const FSDP2Config& config);

// The run's dimensions on `world` ranks (a single rank without --use-torch-fsdp2); a size that
// does not divide the world is an error naming where it was given.
parallel::ParallelDims parallel_dims(const TrainingArguments& args, const FSDP2Config& config, int world);

// --distributed-timeout-minutes as the rendezvous and the process groups take it.
std::chrono::milliseconds distributed_timeout(const TrainingArguments& args);

// What parallelize is asked to do by a merged config: frozen prefixes, TiledMLP, wrapping,
// recompute and sharding (on). The device and the initialization are the run's, for the caller
// to set.
models::ParallelizeSettings parallelize_settings(const FSDP2Config& config);
// The same with the checked flags: LoRA, and sharding only with --use-torch-fsdp2.
models::ParallelizeSettings parallelize_settings(const TrainingArguments& args, const FSDP2Config& config);

}  // namespace megacpp::settings
