// The FSDP2 configuration a run uses: fsdp2_config.yaml (--fsdp2-config-path) with the
// flags Megatron users give on the command line: precision (--bf16, --grad-reduce-in-bf16),
// activation recompute (--recompute-granularity full, --recompute-method, --recompute-num-layers),
// Ulysses (--context-parallel-size), frozen prefixes and --async-save; the rest of the run reads
// these from the result only.
#pragma once

#include "settings/arguments.h"
#include "settings/fsdp2_config.h"

namespace megacpp::settings {

// A flag and a YAML key that disagree (--bf16 with param_dtype fp32, --recompute-granularity
// with recompute_modules) is an error naming both.
FSDP2Config fsdp2_config_from_args(const TrainingArguments& args);

}  // namespace megacpp::settings
