#include "settings/parallelism.h"

#include <stdexcept>

#include "megacpp/errors.h"

namespace megacpp::settings {

std::chrono::milliseconds distributed_timeout(const TrainingArguments& args) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double, std::ratio<60>>(args.distributed_timeout_minutes));
}
namespace {

// Megatron's --context-parallel-size, as MindSpeed's ulysses_cp_algo (its default).
void check_context_parallel_flags(const TrainingArguments& a) {
  require(a.context_parallel_size >= 1, "--context-parallel-size must be >= 1");
  if (a.context_parallel_size == 1) return;  // no algorithm runs
  require(a.context_parallel_algo == "ulysses_cp_algo",
          "--context-parallel-algo " + a.context_parallel_algo + ": not supported; megacpp's context parallelism is "
          "DeepSpeed-Ulysses (ulysses_cp_algo, MindSpeed's default): attention exchanges the sequence split for a head split");
  require(a.use_torch_fsdp2, "--context-parallel-size needs --use-torch-fsdp2 (the ranks that split a sequence are FSDP2's)");
}

}  // namespace

void check_context_parallel(const TrainingArguments& args, const FSDP2Config& config) {
  check_context_parallel_flags(args);
  require(args.context_parallel_size == 1 || config.ulysses_size == args.context_parallel_size,
          "--context-parallel-size " + std::to_string(args.context_parallel_size) + " conflicts with ulysses_size " +
              std::to_string(config.ulysses_size) + " in " + args.fsdp2_config_path + " (remove one of them)");
  require(args.seq_length % config.ulysses_size == 0, "--seq-length " + std::to_string(args.seq_length) + " does not divide by " +
                                                          cp_setting(args, config) +
                                                          ": each rank takes an equal slice of every sequence");
}

std::string cp_setting(const TrainingArguments& args, const FSDP2Config& config) {
  const std::string size = std::to_string(config.ulysses_size);
  return args.context_parallel_size > 1 ? "--context-parallel-size " + size : "ulysses_size " + size + " in " + args.fsdp2_config_path;
}

parallel::ParallelDims parallel_dims(const TrainingArguments& args, const FSDP2Config& config, int world) {
  if (!args.use_torch_fsdp2) {  // one rank (more turn FSDP2 on): a TP size above 1 does not divide it
    if (args.tensor_model_parallel_size > 1) parallel::ParallelDims::resolve(world, 1, 1, "", "", args.tensor_model_parallel_size);
    return parallel::ParallelDims{};
  }
  if (args.sequence_parallel) {
    const std::string tp = std::to_string(args.tensor_model_parallel_size);
    require(args.seq_length % args.tensor_model_parallel_size == 0,
            "--sequence-parallel: --seq-length " + std::to_string(args.seq_length) + " does not divide by --tensor-model-parallel-size " +
                tp + ": each rank holds an equal slice of every sequence between the blocks");
    require(!args.variable_seq_lengths, "--sequence-parallel with --variable-seq-lengths: the cut micro-batches' lengths need not "
                                        "divide by --tensor-model-parallel-size " + tp + "; not supported yet");
  }
  return parallel::ParallelDims::resolve(world, config.sharding_size, config.ulysses_size, "sharding_size",
                                         args.context_parallel_size > 1 ? "--context-parallel-size" : "ulysses_size",
                                         args.tensor_model_parallel_size);
}

models::ParallelizeSettings parallelize_settings(const FSDP2Config& config) {
  models::ParallelizeSettings settings;
  settings.freeze_module_prefix = config.freeze_module_prefix;
  settings.tiled_mlp = config.tiled_mlp;
  settings.wrap = config.wrap;
  settings.recompute = config.recompute;
  settings.sharding = config.sharding;
  return settings;
}

models::ParallelizeSettings parallelize_settings(const TrainingArguments& args, const FSDP2Config& config) {
  models::ParallelizeSettings settings = parallelize_settings(config);
  settings.lora = args.lora;
  settings.shard = args.use_torch_fsdp2;
  settings.cp_setting = cp_setting(args, config);
  settings.tensor_parallel_setting = "--tensor-model-parallel-size " + std::to_string(args.tensor_model_parallel_size);
  settings.sequence_parallel = args.sequence_parallel;
  return settings;
}

}  // namespace megacpp::settings
