#include "megacpp/training/trainer.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "megacpp/config/fsdp2_config_yaml.h"
#include "megacpp/logging.h"
#include "megacpp/training/lr_schedule.h"
#include "megacpp/training/memory_report.h"
#include "megacpp/training/mock_data.h"
#include "models/registry.h"
#include "parallel/collectives.h"
#include "parallel/compat.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/grad_norm.h"

namespace megacpp::training {
namespace {

using Clock = std::chrono::steady_clock;

models::FSDP2Config resolve_fsdp2_config(const TrainingArguments& args) {
  models::FSDP2Config defaults;
  if (args.bf16) {
    defaults.param_dtype = c10::kBFloat16;
    defaults.reduce_dtype = c10::kFloat;
  }
  if (args.fsdp2_config_path.empty()) return defaults;
  models::FSDP2Config config = config::load_fsdp2_config(args.fsdp2_config_path, defaults);
  if (args.bf16 && config.param_dtype != c10::kBFloat16) {
    throw std::invalid_argument("--bf16 conflicts with param_dtype in " + args.fsdp2_config_path +
                                " (remove one of them)");
  }
  return config;
}

// Megatron's rule: weight decay on matrices, not on biases and norm weights.
std::unique_ptr<torch::optim::AdamW> make_optimizer(const TrainingArguments& args, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& p : params) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto options = torch::optim::AdamWOptions(args.lr)
                     .betas({args.adam_beta1, args.adam_beta2})
                     .eps(args.adam_eps)
                     .weight_decay(args.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, options);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

std::string iteration_line(int64_t it, int64_t iters, int64_t consumed, double ms, double lr, int64_t global_batch,
                           double loss, double grad_norm, double tokens_per_second) {
  char line[512];
  std::snprintf(line, sizeof(line),
                " iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                "learning rate: %.6E | global batch size: %5lld | lm loss: %.6E | grad norm: %.3f | "
                "tokens per second: %.1f |",
                static_cast<long long>(it), static_cast<long long>(iters), static_cast<long long>(consumed), ms, lr,
                static_cast<long long>(global_batch), loss, grad_norm, tokens_per_second);
  return line;
}

void dump_parameters(torch::nn::Module& model, const std::string& path, int rank) {
  auto full = parallel::fsdp::gather_full_parameters(model);  // collective
  if (rank != 0) return;
  c10::Dict<std::string, at::Tensor> dict;
  for (auto& [name, tensor] : full) dict.insert(name, tensor.cpu());
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream out(path, std::ios::binary);
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error("--dump-final-params: cannot write '" + path + "'");
  }
  spdlog::info("wrote final parameters ({} tensors) to {}", full.size(), path);
}

}  // namespace

int run_training(const TrainingArguments& args) {
  const auto env = parallel::read_launch_environment();
  parallel::RuntimeOptions runtime_options;
  runtime_options.timeout = std::chrono::minutes(args.distributed_timeout_minutes);
  setup_logging(env.rank);
  if (env.world_size > 1 && !args.use_torch_fsdp2) {
    throw std::invalid_argument("running on " + std::to_string(env.world_size) +
                                " ranks needs --use-torch-fsdp2 (megacpp's data parallelism is FSDP2)");
  }
  const models::FSDP2Config fsdp_config = resolve_fsdp2_config(args);
  auto runtime = parallel::DistributedRuntime::initialize(env, runtime_options);
  const c10::Device device = runtime->device();
  if (!parallel::compat::kCpuHalfMatmul && device.is_cpu() && fsdp_config.param_dtype == c10::kHalf) {
    throw std::invalid_argument("param_dtype fp16 is not supported on CPU by this libtorch (no fp16 matmul); use bf16");
  }
  const parallel::DeviceMesh mesh =
      args.use_torch_fsdp2 ? parallel::DeviceMesh::build(*runtime, fsdp_config.sharding_size) : parallel::DeviceMesh::single();
  const int dp_size = mesh.data_parallel_size(), dp_rank = mesh.data_parallel_rank();
  const int64_t accumulation = gradient_accumulation_steps(args, dp_size);
  const int64_t global_batch = args.micro_batch_size * dp_size * accumulation;

  torch::manual_seed(args.seed);
  const bool meta = args.init_model_with_meta_device;
  auto build_options = torch::TensorOptions().dtype(torch::kFloat).device(meta ? c10::Device(c10::kMeta) : device);
  auto model = models::create_model(args.model_type, args.model, build_options);
  auto init = [&] { model->init_weights(args.init_method_std, args.seed); };
  if (args.use_torch_fsdp2) {
    if (!meta) init();
    model->fully_shard(mesh, fsdp_config, device, meta ? std::function<void()>(init) : nullptr);
  } else {
    init();
  }
  std::vector<at::Tensor> params;  // each tensor once, even if several modules share it
  std::unordered_set<const c10::TensorImpl*> seen;
  int64_t parameter_count = 0;
  for (auto& p : model->parameters()) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    params.push_back(p);
    int64_t numel = 1;
    for (int64_t size : parallel::fsdp::full_shape(p)) numel *= size;
    parameter_count += numel;
  }
  auto optimizer = make_optimizer(args, params);
  LearningRateSchedule schedule(args.lr, args.min_lr, args.lr_warmup_iters,
                                args.lr_decay_iters > 0 ? args.lr_decay_iters : args.train_iters, args.lr_decay_style);
  MockDataset data(model->vocab_size(), args.seq_length, args.seed);

  spdlog::info("megacpp-train | model {}: {} parameters, {:.3e} FLOPs/token | {} ranks, {} | device {}", args.model_type,
               parameter_count, model->flops_per_token(args.seq_length), runtime->world_size(),
               args.use_torch_fsdp2 ? mesh.describe() : std::string("no FSDP"), device.str());
  spdlog::info("batch: micro {} x data-parallel {} x accumulation {} = global {} samples of {} tokens",
               args.micro_batch_size, dp_size, accumulation, global_batch, args.seq_length);

  double interval_loss = 0, interval_ms = 0;
  int64_t interval_iters = 0;
  for (int64_t it = 1; it <= args.train_iters; ++it) {
    const auto start = Clock::now();
    const double lr = schedule.at(it);
    set_learning_rate(*optimizer, lr);
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    double loss_sum = 0;
    for (int64_t m = 0; m < accumulation; ++m) {
      const int64_t first = (it - 1) * global_batch + dp_rank * args.micro_batch_size * accumulation + m * args.micro_batch_size;
      at::Tensor tokens = data.batch(first, args.micro_batch_size).to(device);  // [micro, seq + 1]
      at::Tensor input = tokens.narrow(1, 0, args.seq_length), labels = tokens.narrow(1, 1, args.seq_length);
      if (args.use_torch_fsdp2) parallel::fsdp::set_requires_gradient_sync(*model, m == accumulation - 1);
      at::Tensor logits = (*model)(input);  // [micro, seq, vocab]
      at::Tensor loss = torch::cross_entropy_loss(logits.to(torch::kFloat).view({-1, model->vocab_size()}), labels.reshape({-1}));
      (loss / static_cast<double>(accumulation)).backward();
      loss_sum += loss.item<double>();
    }
    at::Tensor loss_mean = torch::full({1}, loss_sum / accumulation, torch::TensorOptions().dtype(torch::kDouble).device(device));
    parallel::all_reduce(runtime->world(), loss_mean, parallel::ReduceOp::kAvg).wait();
    const double grad_norm = parallel::fsdp::clip_grad_norm(params, args.clip_grad, mesh);
    optimizer->step();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();

    interval_loss += loss_mean.item<double>();
    interval_ms += ms;
    ++interval_iters;
    if (it % args.log_interval == 0 || it == args.train_iters) {
      const double avg_ms = interval_ms / interval_iters;
      spdlog::info(iteration_line(it, args.train_iters, it * global_batch, avg_ms, lr, global_batch,
                                  interval_loss / interval_iters, grad_norm,
                                  global_batch * args.seq_length / (avg_ms / 1000.0)));
      interval_loss = interval_ms = 0;
      interval_iters = 0;
    }
    if (it == 1) {
      std::printf("%s\n", measure_memory(params, *optimizer, device).format(runtime->rank()).c_str());
      std::fflush(stdout);
    }
  }
  if (!args.dump_final_params.empty()) dump_parameters(*model, args.dump_final_params, runtime->rank());
  runtime->barrier();
  return 0;
}

}  // namespace megacpp::training
