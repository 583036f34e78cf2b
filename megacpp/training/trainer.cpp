#include "megacpp/training/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/tensor_convert.h"
#include "checkpoint/torch_save.h"
#include "megacpp/config/fsdp2_config_yaml.h"
#include "megacpp/data/dataset_builder.h"
#include "megacpp/metrics/tensorboard_writer.h"
#include "megacpp/logging.h"
#include "megacpp/training/checkpointing.h"
#include "megacpp/training/lr_schedule.h"
#include "megacpp/training/memory_report.h"
#include "megacpp/training/log_lines.h"
#include "megacpp/training/training_data.h"
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
namespace fs = std::filesystem;

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

// Cross-entropy of next-token prediction on one micro-batch of tokens [micro, seq + 1].
at::Tensor language_model_loss(models::LanguageModel& model, const at::Tensor& tokens, int64_t seq_length) {
  at::Tensor input = tokens.narrow(1, 0, seq_length), labels = tokens.narrow(1, 1, seq_length);
  at::Tensor logits = model(input);  // [micro, seq, vocab]
  return torch::cross_entropy_loss(logits.to(torch::kFloat).view({-1, model.vocab_size()}), labels.reshape({-1}));
}

// Mean over ranks of a per-rank value (every rank gets the result).
double average_over_ranks(const parallel::Group& group, double value, const c10::Device& device) {
  at::Tensor t = torch::full({1}, value, torch::TensorOptions().dtype(torch::kDouble).device(device));
  parallel::all_reduce(group, t, parallel::ReduceOp::kAvg).wait();
  return t.item<double>();
}

// Megatron's evaluate(): `iters` global batches from `consumed` on, no gradients, loss
// averaged over micro-batches and ranks.
double evaluate(models::LanguageModel& model, const data::SampleSource& source, int64_t consumed, int64_t iters,
                int64_t accumulation, const BatchSlice& slice, int64_t global_batch, const TrainingArguments& args,
                parallel::DistributedRuntime& runtime) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    for (int64_t m = 0; m < accumulation; ++m) {
      at::Tensor tokens = load_micro_batch(source, consumed + i * global_batch, m, slice, args.tokenizer_vocab_size).to(runtime.device());
      sum += language_model_loss(model, tokens, args.seq_length).item<double>();
    }
  }
  return average_over_ranks(runtime.world(), sum / static_cast<double>(iters * accumulation), runtime.device());
}

void dump_parameters(torch::nn::Module& model, const std::string& path, int rank) {
  auto full = parallel::fsdp::gather_full_parameters(model);  // collective
  if (rank != 0) return;
  // torch.save's format with only the pickle opcodes weights_only=True accepts: any PyTorch loads it.
  std::vector<std::pair<checkpoint::PyValue, checkpoint::PyValue>> items;
  for (auto& [name, tensor] : full) {
    items.emplace_back(checkpoint::PyValue::string(name),
                       checkpoint::PyValue::tensor(std::make_shared<checkpoint::RawTensor>(checkpoint::to_raw(tensor))));
  }
  try {
    checkpoint::write_file_atomically(path, checkpoint::torch_save(checkpoint::PyValue::dict(std::move(items))));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("--dump-final-params: ") + e.what());
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

  // Data first: a bad path or split fails before the model is built.
  const TrainingData data = build_training_data(args, global_batch);
  torch::manual_seed(args.seed);
  const bool meta = args.init_model_with_meta_device;
  auto build_options = torch::TensorOptions().dtype(torch::kFloat).device(meta ? c10::Device(c10::kMeta) : device);
  auto model = models::create_model(*args.model, build_options);
  // --no-initialization: the shards are left as allocated; --load fills them.
  auto init = [&] {
    if (!args.no_initialization) model->init_weights(args.init_method_std, args.seed);
  };
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
  TrainingCheckpointer checkpointer(args, *runtime, mesh, args.async_save || fsdp_config.async_save_ckpt);
  const TrainingProgress resumed = checkpointer.load(*model, *optimizer);
  const BatchSlice slice{args.micro_batch_size, dp_rank, dp_size};
  const double flops_per_token = model->flops_per_token(args.seq_length);

  spdlog::info("megacpp-train | model {}: {} parameters, {:.3e} training FLOPs/token, vocabulary {} ({} padded to {}) | "
               "{} ranks, {} | device {}",
               args.model_type, parameter_count, flops_per_token, args.tokenizer.type,
               args.tokenizer_vocab_size, model->vocab_size(), runtime->world_size(),
               args.use_torch_fsdp2 ? mesh.describe() : std::string("no FSDP"), device.str());
  spdlog::info("batch: micro {} x data-parallel {} x accumulation {} = global {} samples of {} tokens", args.micro_batch_size,
               dp_size, accumulation, global_batch, args.seq_length);
  for (const auto& line : data.summary) spdlog::info("data: {}", line);
  spdlog::info("samples: train {}, validation {}, test {} (split {})", data.samples_needed[data::kTrain],
               data.samples_needed[data::kValid], data.samples_needed[data::kTest], args.split);

  std::unique_ptr<metrics::TensorBoardWriter> tensorboard;
  if (!args.tensorboard_dir.empty() && runtime->rank() == 0) {
    tensorboard = std::make_unique<metrics::TensorBoardWriter>(args.tensorboard_dir);
    spdlog::info("tensorboard: writing {}", tensorboard->path());
  }
  // Metrics are not worth a training run: a failed write (say, a full disk) stops TensorBoard.
  auto flush_tensorboard = [&] {
    try {
      tensorboard->flush();
    } catch (const std::exception& e) {
      spdlog::warn("tensorboard: {}; no more events are written", e.what());
      tensorboard.reset();
    }
  };
  auto validate = [&](int64_t split, int64_t consumed, const std::string& where, int64_t step) {
    const double loss = evaluate(*model, *data.splits[split], consumed, args.eval_iters, accumulation, slice, global_batch,
                                 args, *runtime);
    if (runtime->rank() == 0) std::printf("%s\n", validation_block(where, loss).c_str()), std::fflush(stdout);
    if (tensorboard) {
      const std::string tag = split == data::kValid ? "lm loss validation" : "lm loss test";
      tensorboard->add_scalar(tag, loss, step);
      tensorboard->add_scalar(tag + " ppl", std::exp(std::min(20.0, loss)), step);
      flush_tensorboard();
    }
  };

  auto throughput = [&](double ms) {
    IterationStats stats;
    stats.ms_per_iteration = ms;
    stats.tokens_per_second = static_cast<double>(global_batch * args.seq_length) / (ms / 1000.0);
    stats.tokens_per_second_per_rank = stats.tokens_per_second / runtime->world_size();
    stats.tflops_per_rank = stats.tokens_per_second_per_rank * flops_per_token / 1e12;
    stats.mfu = args.peak_tflops > 0 ? stats.tflops_per_rank / args.peak_tflops : -1;
    return stats;
  };

  int64_t consumed_train = resumed.consumed_train, consumed_valid = resumed.consumed_valid;
  double interval_loss = 0, interval_ms = 0;
  int64_t interval_iters = 0;
  bool exited_early = false;
  // A checkpoint loaded from another directory counts as not yet saved (as in Megatron, the
  // end of the run saves it): --load A --save B with no iterations left converts A.
  const bool loaded_from_save_dir = !args.load.empty() && !args.save.empty() &&
                                    fs::weakly_canonical(args.load) == fs::weakly_canonical(args.save);
  int64_t last_iteration = resumed.iteration, last_saved = loaded_from_save_dir ? resumed.iteration : 0;
  auto save_checkpoint = [&] {
    checkpointer.save({last_iteration, consumed_train, consumed_valid}, *model, *optimizer);
    last_saved = last_iteration;
  };
  for (int64_t it = resumed.iteration + 1; it <= args.train_iters; ++it) {
    const auto start = Clock::now();
    const double lr = schedule.at(it);
    set_learning_rate(*optimizer, lr);
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    double loss_sum = 0;
    for (int64_t m = 0; m < accumulation; ++m) {
      at::Tensor tokens = load_micro_batch(*data.splits[data::kTrain], consumed_train, m, slice, args.tokenizer_vocab_size).to(device);
      if (args.use_torch_fsdp2) parallel::fsdp::set_requires_gradient_sync(*model, m == accumulation - 1);
      at::Tensor loss = language_model_loss(*model, tokens, args.seq_length);
      (loss / static_cast<double>(accumulation)).backward();
      loss_sum += loss.item<double>();
    }
    const double loss = average_over_ranks(runtime->world(), loss_sum / accumulation, device);
    const double grad_norm = parallel::fsdp::clip_grad_norm(params, args.clip_grad, mesh);
    optimizer->step();
    consumed_train += global_batch;
    last_iteration = it;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();

    IterationStats stats = throughput(ms);
    if (tensorboard && it % args.tensorboard_log_interval == 0) {
      tensorboard->add_scalar("lm loss", loss, it);
      tensorboard->add_scalar("learning-rate", lr, it);
      tensorboard->add_scalar("grad-norm", grad_norm, it);
      tensorboard->add_scalar("throughput/tokens-per-second", stats.tokens_per_second, it);
      tensorboard->add_scalar("throughput/tflops-per-rank", stats.tflops_per_rank, it);
      const MemoryReport memory = measure_memory(params, *optimizer, device);
      tensorboard->add_scalar("memory/peak-mb", memory.peak_mb, it);
      tensorboard->add_scalar("memory/state-mb", memory.sharded_params_mb + memory.sharded_grads_mb + memory.optimizer_state_mb, it);
    }
    interval_loss += loss;
    interval_ms += ms;
    ++interval_iters;
    const bool exiting = args.exit_interval > 0 && it % args.exit_interval == 0;
    if (it % args.log_interval == 0 || it == args.train_iters || exiting) {
      stats = throughput(interval_ms / interval_iters);
      stats.iteration = it;
      stats.train_iters = args.train_iters;
      stats.consumed_samples = consumed_train;
      stats.global_batch = global_batch;
      stats.learning_rate = lr;
      stats.loss = interval_loss / interval_iters;
      stats.grad_norm = grad_norm;
      spdlog::info(iteration_line(stats));
      if (tensorboard) flush_tensorboard();
      interval_loss = interval_ms = 0;
      interval_iters = 0;
    }
    if (it == 1) {
      std::printf("%s\n", measure_memory(params, *optimizer, device).format(runtime->rank()).c_str());
      std::fflush(stdout);
    }
    if (data.splits[data::kValid] && args.eval_iters > 0 && it % args.eval_interval == 0) {
      validate(data::kValid, consumed_valid, "iteration " + std::to_string(it), it);
      consumed_valid += args.eval_iters * global_batch;
    }
    if (checkpointer.due(it)) save_checkpoint();
    if (exiting) {
      spdlog::info("exiting program at iteration {} (--exit-interval {})", it, args.exit_interval);
      exited_early = true;
      break;
    }
  }
  // As Megatron: the last iteration is saved too, unless it just was.
  if (!args.save.empty() && last_saved != last_iteration) save_checkpoint();
  if (!exited_early && args.eval_iters > 0) {
    if (data.splits[data::kValid]) validate(data::kValid, consumed_valid, "the end of training for val data", args.train_iters);
    if (data.splits[data::kTest]) validate(data::kTest, 0, "the end of training for test data", args.train_iters);
  }
  if (!args.dump_final_params.empty()) dump_parameters(*model, args.dump_final_params, runtime->rank());
  checkpointer.finish();  // a background save completes before the program exits
  runtime->barrier();
  return 0;
}

}  // namespace megacpp::training
