// What megacpp-train, megacpp-infer and megacpp-grpo do before their loops: resolve the job on
// the launch environment, start the processes and the mesh, build the model from the flags and
// parallelize it (LoRA, freezing, Ulysses, TiledMLP, recompute, FSDP2, in Note [Parallelize]'s
// order).
#pragma once

#include <memory>

#include "models/language_model.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "settings/job_config.h"

namespace megacpp::runtime {

// The processes of a resolved job (Note [Job configuration] in settings/job_config.h).
struct ProcessSetup {
  std::shared_ptr<parallel::DistributedRuntime> runtime;
  c10::Device device = c10::Device(c10::kCPU);
  std::unique_ptr<parallel::DeviceMesh> mesh;  // fully_shard keeps a pointer: the mesh never moves
};

// The launch environment read, logging started for its rank, and the job resolved on it
// (settings::resolve_job): several ranks without --use-torch-fsdp2 turn it on (a note in
// args.notes says so), megacpp's data parallelism being FSDP2.
settings::JobConfig resolve_job(settings::TrainingArguments args, const settings::JobLayout& layout = {});

// Starts the runtime (rendezvous, process groups) and the mesh; refuses what the device cannot
// do (fp16 matmuls on 1.13's CPU, CPU offload without CUDA) naming the flag or key.
ProcessSetup start_processes(const settings::JobConfig& job);

// The fused kernels --kernel-fusion and its --no-*-fusion flags ask for (Note [Fused kernels]),
// process-wide.
void use_kernel_fusion(const settings::TrainingArguments& args);

// The model of the flags, seeded with --seed, on the meta device with
// --init-model-with-meta-device (else on `device`); refuses flags the family cannot honour.
std::shared_ptr<models::LanguageModel> build_model(const settings::TrainingArguments& args, const c10::Device& device);

// parallelize with the run's settings; `initialize`: draw the weights (--init-method-std,
// --seed) once placed, else leave them as allocated for a checkpoint to fill.
void parallelize_model(models::LanguageModel& model, const ProcessSetup& setup, const settings::JobConfig& job, bool initialize);

}  // namespace megacpp::runtime
