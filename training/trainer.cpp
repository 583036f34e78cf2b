// The training run as named steps, in the order run() takes them:
//   start_processes -> build_data -> build_model -> parallelize_model
//   -> build_optimizer -> load_checkpoint -> log_start -> per iteration: train_step, log_iteration,
//   run_validation, save_checkpoint -> finish.
#include "training/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "io/data/dataset_builder.h"
#include "megacpp/logging.h"
#include "io/checkpoint/layout.h"
#include "training/data/batch_prefetcher.h"
#include "training/checkpointing.h"
#include "runtime/heartbeat.h"
#include "runtime/host_memory.h"
#include "training/reporting/iteration_log.h"
#include "training/reporting/iteration_profiler.h"
#include "training/step/forward_backward.h"
#include "training/step/evaluation_loss.h"
#include "training/reporting/log_lines.h"
#include "runtime/memory_estimate.h"
#include "runtime/model_setup.h"
#include "training/optim/loss_scaler.h"
#include "training/optim/lr_schedule.h"
#include "training/optim/optimizer.h"
#include "training/reporting/parameter_dump.h"
#include "training/step/step_health.h"
#include "training/data/training_data.h"
#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/grad_norm.h"

namespace megacpp::training {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct IterationOutcome {
  bool skipped = false;  // the gradients overflowed (--fp16): no step
  double loss = 0, grad_norm = 0;
  std::vector<models::AuxiliaryLoss> auxiliary;  // averaged over micro-batches and ranks
};

class TrainingRun {
 public:
  explicit TrainingRun(const settings::JobConfig& job) : job_(job) {}

  int run() {
    heartbeat_.beat("starting: rendezvous, data and model");
    start_processes();
    if (setup_.runtime->rank() == 0) {  // first, as Megatron prints it
      std::printf("%s\n", reporting::arguments_block(args_.flag_values).c_str());
      std::fflush(stdout);
    }
    estimate_memory();
    build_data();
    // Note [Memory estimate]: an allocation that fails from here on names the phase.
    runtime::with_memory_context([this] { build_and_train(); }, [this] { return heartbeat_.phase(); }, memory_need_);
    return 0;
  }

 private:
  void build_and_train() {
    heartbeat_.beat("building the model");
    build_model();
    heartbeat_.beat("sharding and initializing the model");
    parallelize_model();
    build_optimizer();
    load_checkpoint();
    log_start();
    run_start_ = Clock::now();
    const int64_t first_iteration = progress_.iteration;
    first_consumed_ = progress_.consumed_train;
    bool exited_early = false;
    for (int64_t it = progress_.iteration + 1; it <= args_.train_iters && !exited_early; ++it) {
      const auto start = Clock::now();
      profiler_->before(it);
      // The rate once this iteration's samples are stepped on (Megatron's scheduler counts samples).
      const int64_t batch = batches_.rampup.batch_at(progress_.consumed_train);
      const int64_t stepped = progress_.consumed_train + batch - progress_.skipped_samples;
      const double lr = schedule_->at_samples(stepped);
      const IterationOutcome step = train_step(lr, schedule_->decoupled_at_samples(stepped));
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      profiler_->after(it);
      const bool by_interval = args_.exit_interval > 0 && it % args_.exit_interval == 0;
      const bool by_duration = !by_interval && duration_exceeded();
      exited_early = by_interval || by_duration;
      log_->iteration({it, progress_.consumed_train, lr, step.loss, step.grad_norm, ms, exited_early,
                       scaler_.enabled() ? scaler_.scale() : -1, step.skipped, batch, step.auxiliary},
                      params_, *optimizer_);
      if (data_.splits[io::data::kValid] && args_.eval_iters > 0 && it % args_.eval_interval == 0) {
        run_validation(io::data::kValid, progress_.consumed_valid, "iteration " + std::to_string(it), it);
        progress_.consumed_valid += args_.eval_iters * batches_.global_batch;
      }
      if (checkpointer_->due(it)) save_checkpoint();
      if (by_interval) spdlog::info("exiting program at iteration {} (--exit-interval {})", it, args_.exit_interval);
      if (by_duration) {
        spdlog::info("exiting program after {:.2f} minutes at iteration {} (--exit-duration-in-mins {})",
                     std::chrono::duration<double>(Clock::now() - started_).count() / 60.0, it, args_.exit_duration_in_mins);
      }
    }
    finish(exited_early);
    log_summary(first_iteration);
  }

  // The runtime and the device mesh.
  void start_processes() {
    setup_ = runtime::start_processes(job_);
    slice_ = {args_.micro_batch_size, setup_.mesh->data_parallel_rank(), setup_.mesh->data_parallel_size(), setup_.mesh->cp().size()};
  }

  // Note [Memory estimate]: before any of the model is allocated.
  void estimate_memory() {
    memory_need_ = runtime::estimate_memory_need(job_);
    if (!setup_.device.is_cpu()) return;  // a GPU's memory is the caching allocator's to report
    if (auto limit = runtime::host_memory_limit()) {
      runtime::refuse_what_cannot_fit(memory_need_, *limit, runtime::model_size_flags(args_));
    }
  }

  // Data before the model: a bad path or split fails before anything is allocated.
  void build_data() {
    const int64_t ramp_samples = batches_.rampup.ramps() ? batches_.rampup.samples_for_iterations(args_.train_iters) : 0;
    data_ = data::build_training_data(args_, batches_.global_batch, /*writes_index_cache=*/setup_.runtime->rank() == 0, ramp_samples);
    prefetcher_ = std::make_unique<data::BatchPrefetcher>(*data_.splits[io::data::kTrain], slice_, batches_.rampup, args_.tokenizer_vocab_size,
                                                    args_.num_workers, data::DocumentBoundaries::of(args_));
  }

  void build_model() { model_ = runtime::build_model(args_, setup_.device); }

  // LoRA, freezing, Ulysses, TiledMLP, initialization and FSDP2, in parallelize's order
  // (Note [Parallelize]). --no-initialization leaves the weights as allocated: --load fills them.
  void parallelize_model() { runtime::parallelize_model(*model_, setup_, job_, !args_.no_initialization); }

  void build_optimizer() {
    std::unordered_set<const c10::TensorImpl*> seen;  // each tensor once, even if several modules share it
    for (auto& p : model_->parameters()) {
      if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
      params_.push_back(p);
      int64_t numel = 1;
      for (int64_t size : parallel::fsdp::full_shape(p)) numel *= size;
      parameter_count_ += numel;
    }
    optimizer_ = optim::make_optimizer(args_, params_, optim::input_and_output_parameters(*model_, args_));
    schedule_ = std::make_unique<optim::LearningRateSchedule>(args_, batches_.global_batch);
  }

  void load_checkpoint() {
    heartbeat_.beat("loading the checkpoint");
    checkpointer_ = std::make_unique<TrainingCheckpointer>(args_, *setup_.runtime, *setup_.mesh,
                                                           job_.fsdp.async_save_ckpt);
    progress_ = checkpointer_->load(*model_, *optimizer_);
    if (progress_.loss_scaler && scaler_.enabled()) scaler_.restore(*progress_.loss_scaler);
    // A checkpoint loaded from another directory counts as not yet saved (as in Megatron, the
    // end of the run saves it): --load A --save B with no iterations left converts A.
    const std::string& resumed = args_.lora_load.empty() ? args_.load : args_.lora_load;
    const bool loaded_from_save_dir = !resumed.empty() && !args_.save.empty() &&
                                      fs::weakly_canonical(resumed) == fs::weakly_canonical(args_.save);
    last_saved_ = loaded_from_save_dir ? progress_.iteration : 0;
  }

  void log_start() {
    flops_per_token_ = model_->flops_per_token(args_.seq_length);
    spdlog::info("megacpp-train | model {}: {} parameters, {:.3e} training FLOPs/token, vocabulary {} ({} padded to {}) | "
                 "{} ranks, {} | device {}",
                 args_.model_type, parameter_count_, flops_per_token_, args_.tokenizer.type, args_.tokenizer_vocab_size,
                 model_->vocab_size(), setup_.runtime->world_size(),
                 args_.use_torch_fsdp2 ? setup_.mesh->describe() : std::string("no FSDP"), setup_.device.str());
    auto dtype = [](const c10::optional<c10::ScalarType>& t, const char* unset) {
      return t ? std::string(c10::toString(*t)) : std::string(unset);
    };
    const models::ShardingPolicy& precision = job_.fsdp.sharding;
    spdlog::info("precision: parameters and optimizer state Float (the sharded masters) | compute {} | gradient reduction {} "
                 "| loss Float",
                 dtype(precision.param_dtype, "Float"),
                 dtype(precision.reduce_dtype ? precision.reduce_dtype : precision.param_dtype, "Float"));
    spdlog::info("batch: micro {} x data-parallel {} x accumulation {} = global {} samples of {} tokens{}",
                 args_.micro_batch_size, slice_.dp_size, batches_.accumulation, batches_.global_batch, args_.seq_length,
                 batches_.rampup.ramps() ? " | " + batches_.rampup.describe() : std::string());
    for (const auto& line : data_.summary) spdlog::info("data: {}", line);
    for (const auto& note : args_.notes) spdlog::info("{}", note);
    spdlog::info("samples: train {}, validation {}, test {} (split {})", data_.samples_needed[io::data::kTrain],
                 data_.samples_needed[io::data::kValid], data_.samples_needed[io::data::kTest], args_.split);
    log_ = std::make_unique<reporting::IterationLog>(
        args_, reporting::RunShape{setup_.runtime->world_size(), setup_.runtime->rank(), flops_per_token_, setup_.device});
    profiler_ = std::make_unique<reporting::IterationProfiler>(args_, setup_.runtime->rank());
  }

  // One iteration: forward and backward over the micro-batches, the NaN/Inf check, clipping,
  // the optimizer step. Returns the losses averaged over micro-batches and ranks, and the
  // gradient norm.
  IterationOutcome train_step(double lr, double decoupled_lr) {
    optim::set_learning_rate(*optimizer_, lr, decoupled_lr);
    for (auto& p : params_) p.mutable_grad() = at::Tensor();
    const int64_t it = progress_.iteration + 1;
    heartbeat_.beat(fmt::format("iteration {}: reading the micro-batches", it));
    const std::vector<data::MicroBatch> batches = prefetcher_->take(progress_.consumed_train);
    const step::ForwardBackwardSetup setup{setup_.device, scaler_.scale(), args_.use_torch_fsdp2, setup_.mesh->cp(), setup_.mesh->tp(),
                                     args_.calculate_per_token_loss, setup_.runtime->world(), setup_.mesh->data_parallel_size()};
    const auto pass = step::forward_backward(*model_, batches, setup,
                                       [&](int64_t m) {
                                         heartbeat_.beat(fmt::format("iteration {}: micro-batch {} of {}", it, m + 1, batches.size()));
                                       });
    std::vector<models::AuxiliaryLoss> auxiliary = pass.auxiliary;
    for (auto& a : auxiliary) a.value = parallel::average_over_ranks(setup_.runtime->world(), a.value, setup_.device);
    heartbeat_.beat(fmt::format("iteration {}: gradient norm and optimizer step", it));
    const parallel::fsdp::GradNorm grad_norm =
        optim::finish_gradients(params_, *setup_.mesh, setup_.device, scaler_.enabled() ? 1.0 / scaler_.scale() : 1.0);
    const step::StepHealth health =
        step::gather_step_health(setup_.runtime->world(), pass.mean_loss, grad_norm.local_finite, setup_.device);
    if (args_.check_for_nan_in_loss_and_grad) step::require_finite_step(health, grad_norm.total, it, scaler_.enabled());
    const bool overflow = scaler_.enabled() && (!health.nonfinite_grad_ranks.empty() || !std::isfinite(grad_norm.total));
    if (overflow) return {skip_step(it), health.mean_loss, grad_norm.total, auxiliary};
    scaler_.update(false);
    if (args_.empty_unused_memory_level >= 1) runtime::release_unused_memory(setup_.device);  // Megatron: after forward and backward
    optim::clip_and_step(*optimizer_, params_, args_.clip_grad, grad_norm.total);
    if (args_.empty_unused_memory_level >= 2) runtime::release_unused_memory(setup_.device);  // and after the step
    progress_.consumed_train += batches_.rampup.batch_at(progress_.consumed_train);
    progress_.iteration += 1;
    if (scaler_.enabled()) progress_.loss_scaler = scaler_.state();
    return {false, health.mean_loss, grad_norm.total, auxiliary};
  }

  // An iteration whose scaled gradients overflowed (--fp16): no step, a lower scale, and the
  // schedule does not count it (as Megatron's optimizer reports update_successful = false).
  bool skip_step(int64_t it) {
    const double scale = scaler_.scale();
    scaler_.update(true);
    const int64_t batch = batches_.rampup.batch_at(progress_.consumed_train);
    progress_.consumed_train += batch;
    progress_.skipped_samples += batch;
    progress_.iteration += 1;
    progress_.loss_scaler = scaler_.state();
    spdlog::info("iteration {}: the gradients overflowed at loss scale {}: step skipped, loss scale now {}", it, scale,
                 scaler_.scale());
    return true;
  }

  // Megatron's --exit-duration-in-mins, counted from the process's start. Collective: one rank
  // past the limit stops every rank after the same iteration.
  bool duration_exceeded() {
    if (args_.exit_duration_in_mins <= 0) return false;
    const double minutes = std::chrono::duration<double>(Clock::now() - started_).count() / 60.0;
    return parallel::average_over_ranks(setup_.runtime->world(), minutes > args_.exit_duration_in_mins ? 1.0 : 0.0, setup_.device) > 0;
  }

  // Megatron's evaluate(): --eval-iters global batches from `consumed` on, no gradients, the
  // loss averaged over micro-batches and ranks (with --calculate-per-token-loss, summed over all
  // their labels and divided by their count); logged as Megatron's validation block.
  void run_validation(int64_t split, int64_t consumed, const std::string& where, int64_t step) {
    step::EvaluationLoss total(args_.calculate_per_token_loss, setup_.mesh->cp(), setup_.mesh->tp());
    {
      torch::NoGradGuard no_grad;
      model_->eval();  // no dropout
      for (int64_t i = 0; i < args_.eval_iters; ++i) {
        heartbeat_.beat(fmt::format("validation at {}: batch {} of {}", where, i + 1, args_.eval_iters));
        for (int64_t m = 0; m < batches_.accumulation; ++m) {
          total.add(*model_, data::load_micro_batch(*data_.splits[split], consumed + i * batches_.global_batch, m, slice_,
                                              args_.tokenizer_vocab_size, data::DocumentBoundaries::of(args_)).to(setup_.device));
        }
      }
      model_->train();
    }
    const double loss = total.value(setup_.runtime->world(), setup_.device);
    if (setup_.runtime->rank() == 0) std::printf("%s\n", reporting::validation_block(where, loss).c_str()), std::fflush(stdout);
    if (split == io::data::kValid) {
      if (!best_validation_ || loss < best_validation_->second) best_validation_ = std::make_pair(step, loss);
      last_validation_ = loss;
    }
    log_->validation(split == io::data::kTest, loss, step);
  }

  void save_checkpoint() {
    heartbeat_.beat(fmt::format("iteration {}: saving a checkpoint", progress_.iteration));
    checkpointer_->save(progress_, *model_, *optimizer_);
    last_saved_ = progress_.iteration;
  }

  // As Megatron: the last iteration is saved too (unless it just was), then end-of-training
  // validation and test, the parameter dump, and the wait for a background save.
  void finish(bool exited_early) {
    heartbeat_.beat("finishing: the last save, validation and test");
    if (!args_.save.empty() && last_saved_ != progress_.iteration) save_checkpoint();
    if (!exited_early && args_.eval_iters > 0) {
      if (data_.splits[io::data::kValid]) {
        run_validation(io::data::kValid, progress_.consumed_valid, "the end of training for val data", args_.train_iters);
      }
      if (data_.splits[io::data::kTest]) run_validation(io::data::kTest, 0, "the end of training for test data", args_.train_iters);
    }
    if (!args_.dump_final_params.empty()) reporting::dump_parameters(*model_, args_.dump_final_params, setup_.runtime->rank());
    checkpointer_->finish();
    setup_.runtime->barrier();
  }

  // The line after training (rank 0): iterations, tokens and time of this run, the validation
  // losses, the last checkpoint.
  void log_summary(int64_t first_iteration) {
    if (setup_.runtime->rank() != 0) return;
    reporting::RunSummary summary;
    summary.last_iteration = progress_.iteration;
    summary.iterations_run = progress_.iteration - first_iteration;
    summary.tokens = (progress_.consumed_train - first_consumed_) * args_.seq_length;
    summary.seconds = std::chrono::duration<double>(Clock::now() - run_start_).count();
    summary.best_validation = best_validation_;
    summary.last_validation = last_validation_;
    if (!args_.save.empty() && last_saved_ > 0) summary.checkpoint = io::checkpoint::checkpoint_dir(args_.save, last_saved_);
    std::printf("%s\n", reporting::summary_line(summary).c_str());
    std::fflush(stdout);
  }

  const settings::JobConfig& job_;  // resolved once (Note [Job configuration])
  const settings::TrainingArguments& args_ = job_.args;
  const settings::BatchPlan& batches_ = *job_.batches;
  const Clock::time_point started_ = Clock::now();
  runtime::Heartbeat heartbeat_;  // progress for megacpp-run's hang detection
  runtime::MemoryNeed memory_need_;  // Note [Memory estimate]
  runtime::ProcessSetup setup_;  // the runtime and the mesh
  int64_t first_consumed_ = 0;                   // training samples consumed when this run started
  data::BatchSlice slice_{};
  data::TrainingData data_;
  std::unique_ptr<data::BatchPrefetcher> prefetcher_;  // reads data_'s training split
  std::shared_ptr<models::LanguageModel> model_;
  std::vector<at::Tensor> params_;  // each tensor once
  int64_t parameter_count_ = 0;     // full sizes
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<optim::LearningRateSchedule> schedule_;
  std::unique_ptr<TrainingCheckpointer> checkpointer_;
  std::unique_ptr<reporting::IterationLog> log_;
  std::unique_ptr<reporting::IterationProfiler> profiler_;
  optim::LossScaler scaler_{args_};  // --fp16 / --loss-scale; disabled otherwise (scale 1)
  double flops_per_token_ = 0;
  TrainingProgress progress_;  // iterations done and samples consumed
  int64_t last_saved_ = 0;
  Clock::time_point run_start_;
  std::optional<std::pair<int64_t, double>> best_validation_;  // (iteration, loss) on the validation split
  std::optional<double> last_validation_;
};

}  // namespace

int run_training(const settings::JobConfig& job, const char* program) {
  runtime::use_kernel_fusion(job.args);
  TrainingRun run(job);
  try {
    return run.run();
  } catch (const std::exception& e) {
    // Said before `run` goes: tearing down its process group can end the other ranks, and the
    // launcher then stops this one before a later message would reach the log.
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace megacpp::training
