#include "training/checkpointing.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#ifdef MEGACPP_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/lora_export.h"
#include "checkpoint/model_args.h"
#include "checkpoint/tensor_convert.h"
#include "runtime/checkpoint_slots.h"
#include "runtime/hf_initialization.h"
#include "settings/batch_plan.h"
#include "training/optim/lr_schedule.h"
#include "parallel/device_mesh.h"
#include "parallel/distributed_runtime.h"
#include "models/lora.h"

namespace megacpp::training {

using runtime::ParamSlot;
using runtime::SlotBlock;

namespace {

using io::serialization::PyValue;

using io::checkpoint::flat_key;

// Every rank's generator states: {"rng_state": {"<rank>": {"torch_rng_state": ...}}}.
io::checkpoint::StatePath rng_path(int rank) { return {"rng_state", std::to_string(rank)}; }

PyValue tensor_value(const at::Tensor& t) {
  return PyValue::tensor(std::make_shared<io::serialization::RawTensor>(checkpoint::to_raw(t)));
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
PyValue schedule_state(const settings::TrainingArguments& args, const TrainingProgress& progress, int dp_size) {
  const int64_t global_batch = args.micro_batch_size * dp_size * settings::gradient_accumulation_steps(args, dp_size);
  const optim::LearningRateSchedule schedule(args, global_batch);
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
PyValue args_state(const settings::TrainingArguments& args, const TrainingProgress& progress, int world_size, int dp_size) {
  nlohmann::json fields = args.model->to_args();
  fields["model_type"] = args.model->model_type();
  fields["seq_length"] = args.seq_length;
  fields["micro_batch_size"] = args.micro_batch_size;
  fields["global_batch_size"] = args.micro_batch_size * dp_size * settings::gradient_accumulation_steps(args, dp_size);  // resolved
  fields["train_iters"] = args.train_iters;
  if (args.train_samples > 0) fields["train_samples"] = args.train_samples;
  fields["seed"] = static_cast<int64_t>(args.seed);
  fields["world_size"] = world_size;
  fields["data_parallel_size"] = dp_size;
  fields["iteration"] = progress.iteration;
  fields["consumed_train_samples"] = progress.consumed_train;
  fields["consumed_valid_samples"] = progress.consumed_valid;
  models::add_lora_args(args.lora, fields);
  return checkpoint::args_namespace(fields);
}

int64_t int_field(const PyValue& dict, const std::string& key, const std::string& where) {
  const PyValue* v = dict.find(key);
  if (!v) throw std::runtime_error(where + ": no '" + key + "'");
  return v->as_int();
}

// Megatron's grad_scaler state: {"scale", "growth_tracker", "hysteresis_tracker"}.
PyValue grad_scaler_state(const optim::LossScalerState& s) {
  return PyValue::dict({{str("scale"), PyValue::real(s.scale)},
                        {str("growth_tracker"), PyValue::integer(s.growth_tracker)},
                        {str("hysteresis_tracker"), PyValue::integer(s.hysteresis_tracker)}});
}

optim::LossScalerState grad_scaler_from(const PyValue& state, const std::string& where) {
  const PyValue* scale = state.find("scale");
  if (!scale) throw std::runtime_error(where + ": no 'scale'");
  return {scale->as_float(), int_field(state, "growth_tracker", where), int_field(state, "hysteresis_tracker", where)};
}


}  // namespace

TrainingCheckpointer::TrainingCheckpointer(const settings::TrainingArguments& args, parallel::DistributedRuntime& runtime,
                                           const parallel::DeviceMesh& mesh, bool async)
    : args_(args), runtime_(runtime), mesh_(mesh), async_(async) {
  if (!args.save.empty()) {
    if (runtime.rank() == 0) save_lock_ = std::make_unique<checkpoint::SaveDirectoryLock>(args.save);
    saver_ = std::make_unique<checkpoint::CheckpointSaver>(runtime.store(), runtime.rank(), mesh.world_size());
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
  auto add_block = [&](const io::checkpoint::StatePath& path, const ParamSlot& slot, const at::Tensor& local) {
    for (const SlotBlock& block : slot.blocks) {
      items.add_block(path, slot.global_shape, block.offsets, runtime::block_rows(slot, block, local).detach());
    }
  };
  const auto slots = runtime::param_slots(model, &optimizer, mesh_);
  int64_t step = 0;
  for (const auto& slot : slots) {
    // Under LoRA the frozen base is saved only with --lora-save-base; frozen parameters have no
    // optimizer state.
    const bool saves_weights = args_.lora.rank == 0 || slot.adapter || args_.lora_save_base;
    if (slot.writes && saves_weights) add_block(format.model(slot.fqn), slot, slot.tensor);
    if (!slot.trainable) continue;
    auto& state = runtime::adam_state(optimizer, slot.tensor);
    step = std::max(step, state.step());
    if (slot.writes) {
      if (with_optimizer) {
        add_block(format.optimizer_state(slot.fqn, "exp_avg"), slot, state.exp_avg());
        add_block(format.optimizer_state(slot.fqn, "exp_avg_sq"), slot, state.exp_avg_sq());
      }
    }
    if (with_optimizer && format.optimizer_groups_per_parameter() && coordinator) {
      // PyTorch keeps AdamW's step as a float32 scalar tensor per parameter.
      ParamSlot scalar = slot;
      scalar.global_shape.clear();
      scalar.blocks = {SlotBlock{}};
      add_block(format.optimizer_state(slot.fqn, "step"), scalar, torch::full({}, static_cast<float>(state.step())));
      const PyValue group = group_hyperparameters(optimizer.param_groups()[slot.group], false, 0);
      for (const auto& [name, value] : group.dict_items()) items.add_flattened(format.param_group(slot.fqn, name.as_string()), value);
    }
  }
  if (!args_.no_save_rng) items.add_flattened(rng_path(rank), rng_state(runtime_.device()));
  if (coordinator) {
    job.add_unsharded("iteration", PyValue::integer(progress.iteration));
    job.add_unsharded("checkpoint_version", PyValue::real(io::checkpoint::kCheckpointVersion));
    job.add_unsharded("opt_param_scheduler", schedule_state(args_, progress, mesh_.data_parallel_size()));
    if (progress.loss_scaler && with_optimizer) job.add_unsharded("grad_scaler", grad_scaler_state(*progress.loss_scaler));
    job.add_unsharded("args", args_state(args_, progress, mesh_.world_size(), mesh_.data_parallel_size()));
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

std::optional<checkpoint::CheckpointReader> TrainingCheckpointer::open(const std::string& root, const std::string& flag,
                                                                       const std::string& otherwise) const {
  std::optional<int64_t> step;
  const bool resumes_from_here = flag == (args_.lora_load.empty() ? "--load" : "--lora-load");
  if (args_.ckpt_step >= 0 && resumes_from_here) step = args_.ckpt_step;
  auto reader = checkpoint::CheckpointReader::open(root, step, flag);
  if (reader) return reader;
  const bool weights_from_folder = flag == "--load" && !args_.init_from_hf_path.empty();
  if ((args_.no_initialization && !weights_from_folder) || args_.exit_on_missing_checkpoint) {
    throw std::runtime_error(flag + " " + root + " has no checkpoint (no " + io::checkpoint::tracker_path(root) + ") and " +
                             (args_.no_initialization ? "--no-initialization leaves the weights uninitialized"
                                                      : "--exit-on-missing-checkpoint is given"));
  }
  spdlog::warn("{} {}: no checkpoint found (no {}); {}", flag, root, io::checkpoint::tracker_path(root), otherwise);
  return std::nullopt;
}

namespace {

// Whether `reader` holds LoRA adapters: its args record lora_r, or (args without it) it has a
// tensor of one of `adapters`.
bool holds_adapters(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& adapters) {
  if (reader.has_object("args") && checkpoint::args_json(reader.object("args")).contains("lora_r")) return true;
  for (const auto& slot : adapters) {
    if (reader.tensors().has(reader.format().model_key(slot.fqn))) return true;
  }
  return false;
}

bool holds_weights(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& slots) {
  return !slots.empty() && reader.tensors().has(reader.format().model_key(slots.front().fqn));
}

}  // namespace

TrainingProgress TrainingCheckpointer::load(torch::nn::Module& model, torch::optim::AdamW& optimizer) {
  const bool from_folder = !args_.init_from_hf_path.empty();
  if (args_.load.empty() && args_.lora_load.empty() && !from_folder) return {};
  const auto slots = runtime::param_slots(model, &optimizer, mesh_);
  const bool lora = args_.lora.rank > 0;
  std::vector<ParamSlot> base, adapters;
  for (const auto& slot : slots) (slot.adapter ? adapters : base).push_back(slot);
  std::optional<checkpoint::CheckpointReader> base_reader;
  if (!args_.load.empty()) {
    base_reader = open(args_.load, "--load",
                       from_folder ? "the model starts from --init-from-hf-path " + args_.init_from_hf_path
                       : lora      ? "the base model is the one --seed initializes"
                                   : "training from scratch");
  }
  if (!base_reader && from_folder) runtime::load_hf_folder(args_.init_from_hf_path, *args_.model, base);
  if (base_reader) {
    runtime::check_model_fits(args_, *base_reader, slots);
    const bool has_adapters = lora && holds_adapters(*base_reader, adapters);
    if (has_adapters && !holds_weights(*base_reader, base)) {
      throw std::runtime_error("--load " + args_.load + " holds LoRA adapters without their base model (saved without "
                               "--lora-save-base): give the base model's checkpoint to --load and this one to --lora-load");
    }
    if (!lora || (has_adapters && args_.lora_load.empty())) {
      if (lora) check_lora_settings(*base_reader, adapters, "--load " + args_.load);
      return resume(*base_reader, slots, optimizer);
    }
    load_base(*base_reader, base);
  }
  if (!lora) return {};
  if (args_.lora_load.empty()) {
    if (args_.no_initialization) {
      throw std::runtime_error("--no-initialization with --lora-rank: --load " + args_.load + " holds no LoRA adapters, so they "
                               "would be uninitialized; give the adapters' checkpoint with --lora-load, or drop --no-initialization");
    }
    if (base_reader) spdlog::info("lora: {} holds no adapters; they start fresh, at iteration 0", base_reader->dir());
    return {};
  }
  auto reader = open(args_.lora_load, "--lora-load", "the adapters start fresh");
  if (reader && args_.load.empty() && holds_weights(*reader, base)) {
    load_base(*reader, base);  // saved with --lora-save-base
  } else if (args_.load.empty() && !from_folder) {
    spdlog::warn("--lora-load without --load: the base model is the one --seed initializes; give the base model's checkpoint "
                 "with --load if the adapters were trained on another");
  }
  if (!reader) return {};
  check_lora_settings(*reader, adapters, "--lora-load " + args_.lora_load);
  runtime::check_model_fits(args_, *reader, slots);
  return resume(*reader, adapters, optimizer);
}

void TrainingCheckpointer::load_base(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& base) const {
  spdlog::info("loading the base model from {} ({})", reader.dir(), reader.format().name());
  for (const auto& slot : base) runtime::load_rows(reader.tensors(), reader.format().model(slot.fqn), slot, slot.tensor);
}

void TrainingCheckpointer::check_lora_settings(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& adapters,
                                               const std::string& given) const {
  const models::LoraSettings saved = checkpoint::checkpoint_lora(reader);
  const std::string where = given + ": ";
  if (saved.rank == 0 && !holds_adapters(reader, adapters)) {
    throw std::runtime_error(where + "the checkpoint holds no LoRA adapters (its args record no lora_r)");
  }
  if (saved.rank == 0) return;  // args from elsewhere: the tensors' shapes are checked as they load
  if (saved.rank != args_.lora.rank || saved.alpha != args_.lora.alpha) {
    throw std::runtime_error(where + "the adapters were trained with --lora-rank " + std::to_string(saved.rank) + " --lora-alpha " +
                             fmt::format("{}", saved.alpha) + "; this run has --lora-rank " + std::to_string(args_.lora.rank) +
                             " --lora-alpha " + fmt::format("{}", args_.lora.alpha));
  }
  // The same adapted layers, however the targets were spelled (all-linear, a list).
  size_t saved_adapters = 0, matching = 0;
  for (const auto& key : reader.tensors().metadata().keys()) {
    if (models::is_lora_parameter(key) && key.rfind(reader.format().model_key(""), 0) == 0 &&
        key.find("optim") == std::string::npos) {
      ++saved_adapters;
    }
  }
  for (const auto& slot : adapters) matching += reader.tensors().has(reader.format().model_key(slot.fqn)) ? 1 : 0;
  if (matching != adapters.size() || saved_adapters != adapters.size()) {
    throw std::runtime_error(where + "the adapters were trained on --lora-target-modules " +
                             fmt::format("{}", fmt::join(saved.target_modules, ",")) + " (" + std::to_string(saved_adapters / 2) +
                             " layers); this run adapts " + fmt::format("{}", fmt::join(args_.lora.target_modules, ",")) + " (" +
                             std::to_string(adapters.size() / 2) + " layers)");
  }
}

// The weights of `slots` and, unless the checkpoint is a release or --finetune, their
// optimizer state, the RNG states and where training stands.
TrainingProgress TrainingCheckpointer::resume(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& slots,
                                              torch::optim::AdamW& optimizer) {
  const bool release = reader.iteration() == io::checkpoint::kReleaseIteration;
  const bool model_only = release || args_.finetune;
  const checkpoint::CheckpointFormat format = reader.format();
  const auto& tensors = reader.tensors();
  spdlog::info("loading checkpoint {} ({}{})", reader.dir(), format.name(), model_only ? ", model weights only" : "");
  for (const auto& slot : slots) runtime::load_rows(tensors, format.model(slot.fqn), slot, slot.tensor);
  if (model_only) return {};

  const std::string where = reader.dir();
  const PyValue saved_args = reader.object("args");
  const PyValue& fields = checkpoint::args_fields(saved_args);
  if (!args_.no_load_optim) load_optimizer(reader, slots, optimizer);
  if (!args_.no_load_rng) {
    const int64_t saved_world = int_field(fields, "world_size", where + " args");
    if (saved_world == mesh_.world_size()) {
      restore_rng_state(tensors, io::checkpoint::flat_key(rng_path(runtime_.rank())), runtime_.device());
    } else {
      spdlog::warn("checkpoint was saved on {} ranks, this run has {}: RNG states are not restored", saved_world,
                   mesh_.world_size());
    }
  }
  TrainingProgress progress;
  progress.iteration = reader.iteration();
  progress.consumed_train = int_field(fields, "consumed_train_samples", where + " args");
  progress.consumed_valid = int_field(fields, "consumed_valid_samples", where + " args");
  if (reader.has_object("opt_param_scheduler")) {
    const PyValue scheduler = reader.object("opt_param_scheduler");
    if (scheduler.find("num_steps")) progress.skipped_samples = progress.consumed_train - int_field(scheduler, "num_steps", where);
  }
  if (!args_.no_load_optim && reader.has_object("grad_scaler")) {
    progress.loss_scaler = grad_scaler_from(reader.object("grad_scaler"), where + " grad_scaler");
  }
  spdlog::info("resuming at iteration {} ({} training and {} validation samples consumed)", progress.iteration,
               progress.consumed_train, progress.consumed_valid);
  return progress;
}

// AdamW's moments and steps of the trainable `slots`.
void TrainingCheckpointer::load_optimizer(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& slots,
                                          torch::optim::AdamW& optimizer) const {
  const checkpoint::CheckpointFormat format = reader.format();
  const auto& tensors = reader.tensors();
  const std::string where = reader.dir();
  std::vector<ParamSlot> trained;
  for (const auto& slot : slots) {
    if (slot.trainable) trained.push_back(slot);
  }
  if (!trained.empty() && !tensors.has(io::checkpoint::flat_key(format.optimizer_state(trained.front().fqn, "exp_avg")))) {
    throw std::runtime_error(where + " holds no optimizer state (saved with --no-save-optim?): add --no-load-optim or --finetune");
  }
  std::vector<int64_t> group_steps;
  if (!format.optimizer_groups_per_parameter()) {
    for (const auto& group : reader.object("optimizer").find("param_groups")->items()) {
      group_steps.push_back(int_field(group, "step", where + "/common.pt optimizer.param_groups"));
    }
  }
  for (const auto& slot : trained) {
    if (!tensors.has(io::checkpoint::flat_key(format.optimizer_state(slot.fqn, "exp_avg")))) {
      throw std::runtime_error(where + " holds no optimizer state for " + slot.fqn + ", which this run trains (was it frozen when "
                               "saved?): add --no-load-optim to start the optimizer afresh, or freeze it again");
    }
    auto& state = runtime::adam_state(optimizer, slot.tensor);
    runtime::load_rows(tensors, format.optimizer_state(slot.fqn, "exp_avg"), slot, state.exp_avg());
    runtime::load_rows(tensors, format.optimizer_state(slot.fqn, "exp_avg_sq"), slot, state.exp_avg_sq());
    if (format.optimizer_groups_per_parameter()) {
      state.step(static_cast<int64_t>(tensors.read_tensor(io::checkpoint::flat_key(format.optimizer_state(slot.fqn, "step"))).item<float>()));
    } else {
      if (slot.group >= group_steps.size()) throw std::runtime_error(where + "/common.pt: optimizer param group " + std::to_string(slot.group) + " is missing");
      state.step(group_steps[slot.group]);
    }
  }
}

void TrainingCheckpointer::finish() {
  if (saver_) saver_->finish();
}

}  // namespace megacpp::training
