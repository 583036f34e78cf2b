#include "settings/job_config.h"

#include <string>

#include "settings/fsdp2_config_from_args.h"
#include "settings/parallelism.h"

namespace megacpp::settings {

JobConfig resolve_job(TrainingArguments args, const parallel::LaunchEnvironment& launch, const JobLayout& layout) {
  if (launch.world_size > 1 && !args.use_torch_fsdp2) {  // Megatron's plain data parallelism, as FSDP2
    args.use_torch_fsdp2 = true;
    args.notes.push_back("data parallelism on " + std::to_string(launch.world_size) +
                         " ranks without --use-torch-fsdp2: megacpp's data parallelism is FSDP2 (the model one group, "
                         "its parameters, gradients and optimizer state sharded); the same updates as Megatron's DDP");
  }
  JobConfig job;
  job.fsdp = fsdp2_config_from_args(args);
  if (layout.amend) layout.amend(job.fsdp);
  job.dims = parallel_dims(args, job.fsdp, launch.world_size - layout.other_ranks);
  if (layout.plans_batches) {
    job.batches = plan_batches(args, job.dims.data_parallel_size());
    args.train_iters = train_iterations(args, *job.batches);
  }
  job.args = std::move(args);
  job.launch = launch;
  return job;
}

}  // namespace megacpp::settings
