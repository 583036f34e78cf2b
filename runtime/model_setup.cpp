#include "runtime/model_setup.h"

#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "megacpp/logging.h"
#include "models/kernels/fusion.h"
#include "models/parallelize.h"
#include "models/registry.h"
#include "parallel/compat.h"
#include "settings/parallelism.h"

namespace megacpp::runtime {

settings::JobConfig resolve_job(settings::TrainingArguments args, const settings::JobLayout& layout) {
  const parallel::LaunchEnvironment launch = parallel::read_launch_environment();
  setup_logging(launch.rank);
  return settings::resolve_job(std::move(args), launch, layout);
}

ProcessSetup start_processes(const settings::JobConfig& job) {
  const settings::TrainingArguments& args = job.args;
  ProcessSetup setup;
  parallel::RuntimeOptions options;
  options.timeout = settings::distributed_timeout(args);
  setup.runtime = parallel::DistributedRuntime::initialize(job.launch, options);
  setup.device = setup.runtime->device();
  const models::ShardingPolicy& sharding = job.fsdp.sharding;
  if (!parallel::compat::kCpuHalfMatmul && setup.device.is_cpu() && sharding.param_dtype == c10::kHalf) {
    throw std::invalid_argument(std::string(args.fp16 ? "--fp16" : "param_dtype fp16") +
                                " is not supported on CPU by this libtorch (it has no fp16 matmul, as Debian's 1.13); use "
                                "bf16, or build megacpp against PyTorch 2.x");
  }
  if (sharding.offload_to_cpu && !setup.device.is_cuda()) {
    throw std::invalid_argument("offload_to_cpu / offload_policy in " + args.fsdp2_config_path +
                                ": CPU offload needs a CUDA device; this run computes on " + setup.device.str() +
                                ", where the shards are in host memory already (remove the key)");
  }
  setup.mesh = std::make_unique<parallel::DeviceMesh>(args.use_torch_fsdp2 ? parallel::DeviceMesh::build(*setup.runtime, job.dims)
                                                                           : parallel::DeviceMesh::single());
  return setup;
}

void use_kernel_fusion(const settings::TrainingArguments& args) {
  const bool fused = args.kernel_fusion;
  models::kernels::set_kernel_fusion({fused, fused && args.rope_fusion, fused && args.swiglu_fusion, fused, fused, fused});
}

std::shared_ptr<models::LanguageModel> build_model(const settings::TrainingArguments& args, const c10::Device& device) {
  torch::manual_seed(args.seed);
  const c10::Device where = args.init_model_with_meta_device ? c10::Device(c10::kMeta) : device;
  auto model = models::create_model(*args.model, torch::TensorOptions().dtype(torch::kFloat).device(where));
  if ((args.reset_position_ids || args.reset_attention_mask) && !model->takes_packed_documents()) {
    throw std::invalid_argument(std::string(args.reset_position_ids ? "--reset-position-ids" : "--reset-attention-mask") +
                                ": the " + args.model_type + " model does not take document boundaries "
                                "(LanguageModel::takes_packed_documents, Note [Packed documents])");
  }
  if (args.loss_chunk_size > 0) {
    if (!model->takes_labels()) {
      throw std::invalid_argument("--loss-compute-mode chunk: the " + args.model_type + " model computes its logits whole "
                                  "(LanguageModel::takes_labels, Note [Chunked loss])");
    }
    model->set_loss_chunk_size(args.loss_chunk_size);
  }
  return model;
}

void parallelize_model(models::LanguageModel& model, const ProcessSetup& setup, const settings::JobConfig& job, bool initialize) {
  const settings::TrainingArguments& args = job.args;
  models::ParallelizeSettings settings = settings::parallelize_settings(args, job.fsdp);
  settings.device = setup.device;
  if (initialize) settings.initialize = [&model, &args] { model.init_weights(args.init_method_std, args.seed); };
  models::parallelize(model, *setup.mesh, settings);
}

}  // namespace megacpp::runtime
