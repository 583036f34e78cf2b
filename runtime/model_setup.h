// What megacpp-train and megacpp-infer both do before their loops: read the launch environment
// and the parallel layout, start the processes and the mesh, build the model from the flags and
// parallelize it (LoRA, freezing, Ulysses, TiledMLP, recompute, FSDP2, in Note [Parallelize]'s
// order).
#pragma once

#include <functional>
#include <memory>

#include "models/language_model.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "parallel/launch_environment.h"
#include "parallel/parallel_dims.h"
#include "settings/arguments.h"
#include "settings/fsdp2_config.h"

namespace megacpp::runtime {

struct ProcessSetup {
  parallel::LaunchEnvironment env;
  settings::FSDP2Config fsdp_config;  // the YAML merged with the flags
  parallel::ParallelDims dims;        // resolved before any process group exists
  std::shared_ptr<parallel::DistributedRuntime> runtime;
  c10::Device device = c10::Device(c10::kCPU);
  std::unique_ptr<parallel::DeviceMesh> mesh;  // fully_shard keeps a pointer: never moved
};

// The launch environment (logging started for its rank), the FSDP2 config and the dimensions.
// Several ranks without --use-torch-fsdp2 turn it on (a note in args.notes says so): megacpp's
// data parallelism is FSDP2. Checks that need the world size or the YAML throw naming them.
// `other_ranks`: the last ranks of the job are not the mesh's (a GRPO job's rollout workers);
// `amend` changes the FSDP2 config read from the flags before the dimensions are resolved.
ProcessSetup read_process_layout(settings::TrainingArguments& args, int other_ranks = 0,
                                 const std::function<void(settings::FSDP2Config&)>& amend = {});

// Starts the runtime (rendezvous, process groups) and the mesh; refuses what the device cannot
// do (fp16 matmuls on 1.13's CPU, CPU offload without CUDA) naming the flag or key.
void start_processes(ProcessSetup& setup, const settings::TrainingArguments& args);

// The fused kernels --kernel-fusion and its --no-*-fusion flags ask for (Note [Fused kernels]),
// process-wide.
void use_kernel_fusion(const settings::TrainingArguments& args);

// The model of the flags, seeded with --seed, on the meta device with
// --init-model-with-meta-device (else on `device`); refuses flags the family cannot honour.
std::shared_ptr<models::LanguageModel> build_model(const settings::TrainingArguments& args, const c10::Device& device);

// parallelize with the run's settings; `initialize`: draw the weights (--init-method-std,
// --seed) once placed, else leave them as allocated for a checkpoint to fill.
void parallelize_model(models::LanguageModel& model, const ProcessSetup& setup, const settings::TrainingArguments& args,
                       bool initialize);

}  // namespace megacpp::runtime
