#include "megacpp/training/checkpointing.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#ifdef MEGACPP_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/model_args.h"
#include "checkpoint/tensor_convert.h"
#include "megacpp/training/checkpoint_compatibility.h"
#include "megacpp/training/lr_schedule.h"
#include "parallel/compat.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "parallel/fsdp/fsdp_param.h"

namespace megacpp::training {
namespace {

using serialization::PyValue;

using checkpoint::flat_key;

// Every rank's generator states: {"rng_state": {"<rank>": {"torch_rng_state": ...}}}.
checkpoint::StatePath rng_path(int rank) { return {"rng_state", std::to_string(rank)}; }

// One parameter and this rank's rows of it.
struct ParamSlot {
  std::string fqn;
  at::Tensor tensor;  // the sharded fp32 master (or the whole parameter without FSDP)
  std::vector<int64_t> global_shape, offsets;
  bool writes = false;  // the one replica that saves these rows
  size_t group = 0;     // optimizer param group
};

std::vector<ParamSlot> param_slots(torch::nn::Module& model, const torch::optim::AdamW& optimizer,
                                   const parallel::DeviceMesh& mesh, int rank) {
  std::unordered_map<const c10::TensorImpl*, size_t> group_of;
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    for (const auto& p : optimizer.param_groups()[g].params()) group_of[p.unsafeGetTensorImpl()] = g;
  }
  std::vector<ParamSlot> slots;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    ParamSlot slot{item.key(), p, {}, {}, false, 0};
    if (const auto* fsdp = parallel::fsdp::find_fsdp_param(p)) {
      const auto& layout = fsdp->layout();
      slot.global_shape = layout.shape;
      slot.offsets.assign(layout.shape.size(), 0);
      slot.offsets[0] = layout.first_row(mesh.fsdp().rank);
      slot.writes = mesh.ddp().rank == 0 && layout.rows_on(mesh.fsdp().rank) > 0;
    } else {
      slot.global_shape = p.sizes().vec();
      slot.offsets.assign(slot.global_shape.size(), 0);
      slot.writes = rank == 0;
    }
    if (auto it = group_of.find(p.unsafeGetTensorImpl()); it != group_of.end()) slot.group = it->second;
    slots.push_back(std::move(slot));
  }
  return slots;
}

// The AdamW state of `p`, created (zeros, step 0) when the optimizer has not stepped yet.
torch::optim::AdamWParamState& adam_state(torch::optim::AdamW& optimizer, const at::Tensor& p) {
  auto& state = optimizer.state()[parallel::compat::optimizer_state_key(p)];
  if (!state) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    state = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*state);
}

PyValue tensor_value(const at::Tensor& t) {
  return PyValue::tensor(std::make_shared<serialization::RawTensor>(checkpoint::to_raw(t)));
}

PyValue str(const std::string& s) { return PyValue::string(s); }

PyValue group_hyperparameters(const torch::optim::OptimizerParamGroup& group, bool with_step, int64_t step) {
  const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
  std::vector<std::pair<PyValue, PyValue>> items{
      {str("lr"), PyValue::real(o.lr())},
      {str("betas"), PyValue::tuple({PyValue::real(std::get<0>(o.betas())), PyValue::real(std::get<1>(o.betas()))})},
      {str("eps"), PyValue::real(o.eps())},
      {str("weight_decay"), PyValue::real(o.weight_decay())},
      {str("amsgrad"), PyValue::boolean(o.amsgrad())},
      {str("maximize"), PyValue::boolean(false)},
      {str("foreach"), PyValue::none()},
      {str("capturable"), PyValue::boolean(false)},
      {str("differentiable"), PyValue::boolean(false)},
      {str("fused"), PyValue::none()}};
  if (with_step) items.emplace_back(str("step"), PyValue::integer(step));
  return PyValue::dict(std::move(items));
}

// Megatron's RNG entry, per rank.
PyValue rng_state(const c10::Device& device) {
  std::vector<std::pair<PyValue, PyValue>> items;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    items.emplace_back(str("torch_rng_state"), tensor_value(gen.get_state()));
  }
#ifdef MEGACPP_WITH_CUDA
  if (device.is_cuda()) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    items.emplace_back(str("cuda_rng_state"), tensor_value(gen.get_state()));
  }
#endif
  return PyValue::dict(std::move(items));
}

// Restores what rng_state() saved under `base` (rng_state.<rank>).
void restore_rng_state(const checkpoint::DcpReader& reader, const std::string& base, const c10::Device& device) {
  const std::string cpu = base + ".torch_rng_state";
  if (!reader.has(cpu)) {
    throw std::runtime_error(reader.dir() + "/.metadata: the checkpoint has no key '" + cpu + "' (add --no-load-rng to load it without RNG states)");
  }
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(reader.read_tensor(cpu));
  }
#ifdef MEGACPP_WITH_CUDA
  if (const std::string cuda = base + ".cuda_rng_state"; reader.has(cuda) && device.is_cuda()) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(reader.read_tensor(cuda));
  }
#else
  (void)device;
#endif
}

// Megatron's opt_param_scheduler.state_dict(), in samples as Megatron counts them.
PyValue schedule_state(const TrainingArguments& args, const TrainingProgress& progress, int dp_size) {
  const int64_t global_batch = args.micro_batch_size * dp_size * gradient_accumulation_steps(args, dp_size);
  const LearningRateSchedule schedule(args, global_batch);
  const double warmup = schedule.warmup_samples();
  return PyValue::dict({{str("max_lr"), PyValue::real(args.lr)},
                        {str("min_lr"), PyValue::real(args.min_lr)},
                        {str("lr_warmup_steps"), warmup == std::floor(warmup) ? PyValue::integer(static_cast<int64_t>(warmup))
                                                                              : PyValue::real(warmup)},  // float from a fraction
                        {str("lr_decay_steps"), PyValue::integer(schedule.decay_samples())},
                        {str("lr_decay_style"), str(args.lr_decay_style)},
                        {str("num_steps"), PyValue::integer(progress.consumed_train - progress.skipped_samples)}});
}

// The arguments that describe the run (Megatron keeps them, and the data position, in an
// argparse.Namespace).
PyValue args_state(const TrainingArguments& args, const TrainingProgress& progress, int world_size, int dp_size) {
  nlohmann::json fields = args.model->to_args();
  fields["model_type"] = args.model->model_type();
  fields["seq_length"] = args.seq_length;
  fields["micro_batch_size"] = args.micro_batch_size;
  fields["global_batch_size"] = args.micro_batch_size * dp_size * gradient_accumulation_steps(args, dp_size);  // resolved
  fields["train_iters"] = args.train_iters;
  if (args.train_samples > 0) fields["train_samples"] = args.train_samples;
  fields["seed"] = static_cast<int64_t>(args.seed);
  fields["world_size"] = world_size;
  fields["data_parallel_size"] = dp_size;
  fields["iteration"] = progress.iteration;
  fields["consumed_train_samples"] = progress.consumed_train;
  fields["consumed_valid_samples"] = progress.consumed_valid;
  return checkpoint::args_namespace(fields);
}

int64_t int_field(const PyValue& dict, const std::string& key, const std::string& where) {
  const PyValue* v = dict.find(key);
  if (!v) throw std::runtime_error(where + ": no '" + key + "'");
  return v->as_int();
}

// Megatron's grad_scaler state: {"scale", "growth_tracker", "hysteresis_tracker"}.
PyValue grad_scaler_state(const LossScalerState& s) {
  return PyValue::dict({{str("scale"), PyValue::real(s.scale)},
                        {str("growth_tracker"), PyValue::integer(s.growth_tracker)},
                        {str("hysteresis_tracker"), PyValue::integer(s.hysteresis_tracker)}});
}

LossScalerState grad_scaler_from(const PyValue& state, const std::string& where) {
  const PyValue* scale = state.find("scale");
  if (!scale) throw std::runtime_error(where + ": no 'scale'");
  return {scale->as_float(), int_field(state, "growth_tracker", where), int_field(state, "hysteresis_tracker", where)};
}


// Reads this rank's rows of the tensor at `path` into `dest`, checking the global shape first.
void load_rows(const checkpoint::DcpReader& reader, const checkpoint::StatePath& path, const ParamSlot& slot, const at::Tensor& dest) {
  const std::string key = flat_key(path);
  const std::string where = reader.dir() + "/.metadata";
  if (!reader.has(key)) throw std::runtime_error(where + ": the checkpoint has no key '" + key + "' (parameter " + slot.fqn + ")");
  const auto& entry = reader.metadata().entry(key);
  if (!entry.is_tensor || entry.size != slot.global_shape) {
    throw std::runtime_error(where + ": key '" + key + "' has shape " + serialization::shape_string(entry.size) + " in the checkpoint but " +
                             serialization::shape_string(slot.global_shape) + " in the model");
  }
  if (dest.numel() == 0) return;
  at::Tensor staging = at::empty(dest.sizes(), dest.options().device(at::kCPU));
  reader.read_block(key, slot.offsets, staging);
  torch::NoGradGuard no_grad;
  dest.copy_(staging);
}

// Refuses a checkpoint of another model: other `args`, or tensors the model does not have.
void check_model_fits(const TrainingArguments& args, const checkpoint::CheckpointReader& reader,
                      const std::vector<ParamSlot>& slots) {
  const UnexpectedKeys policy = parse_dist_ckpt_strictness(args.dist_ckpt_strictness);
  if (reader.has_object("args")) {
    try {
      check_checkpoint_model(checkpoint::args_json(reader.object("args")), *args.model, reader.dir());
    } catch (const std::runtime_error& e) {
      if (policy == UnexpectedKeys::kRaise) throw;  // only --finetune allows another policy
      spdlog::warn("{}; fine-tuning it anyway (--dist-ckpt-strictness {})", e.what(), args.dist_ckpt_strictness);
    }
  }
  const checkpoint::CheckpointFormat format = reader.format();
  std::vector<std::string> expected;
  for (const auto& slot : slots) {
    expected.push_back(format.model_key(slot.fqn));
    for (const char* state : {"exp_avg", "exp_avg_sq", "step"}) expected.push_back(flat_key(format.optimizer_state(slot.fqn, state)));
  }
  for (const auto& key : reader.tensors().metadata().keys()) {
    if (key.rfind(flat_key({"rng_state"}) + ".", 0) == 0) expected.push_back(key);
  }
  const std::vector<std::string> unexpected = unexpected_tensors(reader.tensors(), expected);
  if (unexpected.empty() || policy == UnexpectedKeys::kIgnore) return;
  std::string listed;
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) listed += (i ? ", " : "") + unexpected[i];
  if (unexpected.size() > 5) listed += " and " + std::to_string(unexpected.size() - 5) + " more";
  const std::string what = reader.dir() + " has " + std::to_string(unexpected.size()) + " tensors the model does not have: " + listed;
  if (policy == UnexpectedKeys::kLog) return spdlog::warn("{} (ignored: --dist-ckpt-strictness {})", what, args.dist_ckpt_strictness);
  throw std::runtime_error(what + ". Was it saved from another model? To load the tensors the model has and ignore the "
                                  "others, add --finetune --dist-ckpt-strictness log_unexpected");
}

}  // namespace

TrainingCheckpointer::TrainingCheckpointer(const TrainingArguments& args, parallel::DistributedRuntime& runtime,
                                           const parallel::DeviceMesh& mesh, bool async)
    : args_(args), runtime_(runtime), mesh_(mesh), async_(async) {
  if (!args.save.empty()) {
    if (runtime.rank() == 0) save_lock_ = std::make_unique<checkpoint::SaveDirectoryLock>(args.save);
    saver_ = std::make_unique<checkpoint::CheckpointSaver>(runtime.store(), runtime.rank(), runtime.world_size());
  }
}

bool TrainingCheckpointer::due(int64_t iteration) const {
  return saver_ && args_.save_interval > 0 && iteration % args_.save_interval == 0;
}

void TrainingCheckpointer::save(const TrainingProgress& progress, torch::nn::Module& model, torch::optim::AdamW& optimizer) {
  if (!saver_) return;
  const checkpoint::CheckpointFormat& format = args_.ckpt_format;
  const int rank = runtime_.rank();
  const bool coordinator = rank == 0, with_optimizer = !args_.no_save_optim;
  checkpoint::SaveJob job;
  job.root = args_.save;
  job.iteration = progress.iteration;
  job.format = format;
  auto& items = job.items;
  auto add_block = [&](const checkpoint::StatePath& path, const ParamSlot& slot, const at::Tensor& local) {
    items.add_block(path, slot.global_shape, slot.offsets, local.detach());
  };
  const auto slots = param_slots(model, optimizer, mesh_, rank);
  int64_t step = 0;
  for (const auto& slot : slots) {
    auto& state = adam_state(optimizer, slot.tensor);
    step = std::max(step, state.step());
    if (slot.writes) {
      add_block(format.model(slot.fqn), slot, slot.tensor);
      if (with_optimizer) {
        add_block(format.optimizer_state(slot.fqn, "exp_avg"), slot, state.exp_avg());
        add_block(format.optimizer_state(slot.fqn, "exp_avg_sq"), slot, state.exp_avg_sq());
      }
    }
    if (with_optimizer && format.optimizer_groups_per_parameter() && coordinator) {
      // PyTorch keeps AdamW's step as a float32 scalar tensor per parameter.
      ParamSlot scalar{slot.fqn, {}, {}, {}, true, slot.group};
      add_block(format.optimizer_state(slot.fqn, "step"), scalar, torch::full({}, static_cast<float>(state.step())));
      const PyValue group = group_hyperparameters(optimizer.param_groups()[slot.group], false, 0);
      for (const auto& [name, value] : group.dict_items()) items.add_flattened(format.param_group(slot.fqn, name.as_string()), value);
    }
  }
  if (!args_.no_save_rng) items.add_flattened(rng_path(rank), rng_state(runtime_.device()));
  if (coordinator) {
    job.add_unsharded("iteration", PyValue::integer(progress.iteration));
    job.add_unsharded("checkpoint_version", PyValue::real(checkpoint::kCheckpointVersion));
    job.add_unsharded("opt_param_scheduler", schedule_state(args_, progress, mesh_.data_parallel_size()));
    if (progress.loss_scaler && with_optimizer) job.add_unsharded("grad_scaler", grad_scaler_state(*progress.loss_scaler));
    job.add_unsharded("args", args_state(args_, progress, runtime_.world_size(), mesh_.data_parallel_size()));
    if (!format.optimizer_groups_per_parameter()) {
      // Megatron's common.pt keeps the param groups with the optimizer.
      if (with_optimizer) {
        std::vector<PyValue> groups;
        for (const auto& group : optimizer.param_groups()) groups.push_back(group_hyperparameters(group, true, step));
        job.add_unsharded("optimizer", PyValue::dict({{str("param_groups"), PyValue::list(std::move(groups))}}));
      }
    }
  }
  saver_->save(std::move(job), async_);
}

TrainingProgress TrainingCheckpointer::load(torch::nn::Module& model, torch::optim::AdamW& optimizer) {
  if (args_.load.empty()) return {};
  std::optional<int64_t> step;
  if (args_.ckpt_step >= 0) step = args_.ckpt_step;
  auto reader = checkpoint::CheckpointReader::open(args_.load, step);
  if (!reader) {
    if (args_.no_initialization || args_.exit_on_missing_checkpoint) {
      throw std::runtime_error("--load " + args_.load + " has no checkpoint (no " + checkpoint::tracker_path(args_.load) + ") and " +
                               (args_.no_initialization ? "--no-initialization leaves the weights uninitialized"
                                                        : "--exit-on-missing-checkpoint is given"));
    }
    spdlog::warn("--load {}: no checkpoint found (no {}); training from scratch", args_.load,
                 checkpoint::tracker_path(args_.load));
    return {};
  }
  const bool release = reader->iteration() == checkpoint::kReleaseIteration;
  const bool model_only = release || args_.finetune;
  const checkpoint::CheckpointFormat format = reader->format();
  const auto& tensors = reader->tensors();
  spdlog::info("loading checkpoint {} ({}{})", reader->dir(), format.name(),
               model_only ? ", model weights only" : "");

  const auto slots = param_slots(model, optimizer, mesh_, runtime_.rank());
  check_model_fits(args_, *reader, slots);
  for (const auto& slot : slots) load_rows(tensors, format.model(slot.fqn), slot, slot.tensor);
  if (model_only) return {};

  const std::string where = reader->dir();
  const PyValue saved_args = reader->object("args");
  const PyValue& fields = checkpoint::args_fields(saved_args);
  if (!args_.no_load_optim) {
    if (!slots.empty() && !tensors.has(flat_key(format.optimizer_state(slots.front().fqn, "exp_avg")))) {
      throw std::runtime_error(where + " holds no optimizer state (saved with --no-save-optim?): add --no-load-optim or --finetune");
    }
    std::vector<int64_t> group_steps;
    if (!format.optimizer_groups_per_parameter()) {
      for (const auto& group : reader->object("optimizer").find("param_groups")->items()) {
        group_steps.push_back(int_field(group, "step", where + "/common.pt optimizer.param_groups"));
      }
    }
    for (const auto& slot : slots) {
      auto& state = adam_state(optimizer, slot.tensor);
      load_rows(tensors, format.optimizer_state(slot.fqn, "exp_avg"), slot, state.exp_avg());
      load_rows(tensors, format.optimizer_state(slot.fqn, "exp_avg_sq"), slot, state.exp_avg_sq());
      if (format.optimizer_groups_per_parameter()) {
        state.step(static_cast<int64_t>(tensors.read_tensor(flat_key(format.optimizer_state(slot.fqn, "step"))).item<float>()));
      } else {
        if (slot.group >= group_steps.size()) throw std::runtime_error(where + "/common.pt: optimizer param group " + std::to_string(slot.group) + " is missing");
        state.step(group_steps[slot.group]);
      }
    }
  }
  if (!args_.no_load_rng) {
    const int64_t saved_world = int_field(fields, "world_size", where + " args");
    if (saved_world == runtime_.world_size()) {
      restore_rng_state(tensors, flat_key(rng_path(runtime_.rank())), runtime_.device());
    } else {
      spdlog::warn("checkpoint was saved on {} ranks, this run has {}: RNG states are not restored", saved_world,
                   runtime_.world_size());
    }
  }
  TrainingProgress progress;
  progress.iteration = reader->iteration();
  progress.consumed_train = int_field(fields, "consumed_train_samples", where + " args");
  progress.consumed_valid = int_field(fields, "consumed_valid_samples", where + " args");
  if (reader->has_object("opt_param_scheduler")) {
    const PyValue scheduler = reader->object("opt_param_scheduler");
    if (scheduler.find("num_steps")) progress.skipped_samples = progress.consumed_train - int_field(scheduler, "num_steps", where);
  }
  if (!args_.no_load_optim && reader->has_object("grad_scaler")) {
    progress.loss_scaler = grad_scaler_from(reader->object("grad_scaler"), where + " grad_scaler");
  }
  spdlog::info("resuming at iteration {} ({} training and {} validation samples consumed)", progress.iteration,
               progress.consumed_train, progress.consumed_valid);
  return progress;
}

void TrainingCheckpointer::finish() {
  if (saver_) saver_->finish();
}

}  // namespace megacpp::training
