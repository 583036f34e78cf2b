#include "runtime/checkpoint_slots.h"

#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "checkpoint/model_args.h"
#include "runtime/checkpoint_compatibility.h"
#include "models/lora.h"
#include "parallel/compat.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::runtime {

using io::checkpoint::flat_key;

namespace {

// The blocks of a TP slice in parts whose rows [first, first + rows) this rank holds: one per
// part's share they reach.
std::vector<SlotBlock> blocks_in_parts(const parallel::TensorParallelPlacement& tp, int64_t first, int64_t rows,
                                       std::vector<int64_t> offsets) {
  const int64_t share = tp.share();
  std::vector<SlotBlock> blocks;
  for (int64_t row = first; row < first + rows;) {
    const int64_t k = row / share, within = row % share, n = std::min(share - within, first + rows - row);
    offsets[0] = tp.share_start(k) + within;
    blocks.push_back({row - first, n, offsets});
    row += n;
  }
  return blocks;
}

// Where this rank's part sits in the whole parameter (Note [Tensor parallelism]: a TP slice, of
// which FSDP2 shards the rows), and whether this rank writes it: the first data-parallel replica
// of each part, the first TP rank of a replicated one.
void place(ParamSlot& slot, const at::Tensor& p, const parallel::DeviceMesh& mesh) {
  const auto* tp = parallel::tensor_parallel_placement(p);
  const bool split = tp && tp->is_split();
  const auto* fsdp = parallel::fsdp::find_fsdp_param(p);
  slot.global_shape = fsdp ? fsdp->layout().shape : p.sizes().vec();
  std::vector<int64_t> offsets(slot.global_shape.size(), 0);
  if (fsdp) offsets[0] = fsdp->layout().first_row(mesh.fsdp().rank);
  const bool first_replica = fsdp ? mesh.ddp().rank == 0 && fsdp->layout().rows_on(mesh.fsdp().rank) > 0
                                  : mesh.ddp().rank == 0 && mesh.fsdp().rank == 0;
  slot.writes = first_replica && (split || mesh.tp().rank == 0);
  const int64_t rows = p.dim() > 0 ? p.size(0) : 0;
  if (split) {
    slot.global_shape = tp->full_shape;
    if (tp->parts > 1) {
      slot.blocks = blocks_in_parts(*tp, offsets[0], rows, offsets);
      return;
    }
    offsets[tp->dim] += tp->share_start(0);
  }
  slot.blocks = {SlotBlock{0, rows, offsets}};
}

}  // namespace

std::vector<ParamSlot> param_slots(torch::nn::Module& model, const torch::optim::AdamW* optimizer,
                                   const parallel::DeviceMesh& mesh) {
  std::unordered_map<const c10::TensorImpl*, size_t> group_of;
  for (size_t g = 0; optimizer && g < optimizer->param_groups().size(); ++g) {
    for (const auto& p : optimizer->param_groups()[g].params()) group_of[p.unsafeGetTensorImpl()] = g;
  }
  std::vector<ParamSlot> slots;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    ParamSlot slot;
    slot.fqn = item.key();
    slot.tensor = p;
    slot.adapter = models::is_lora_parameter(slot.fqn);
    place(slot, p, mesh);
    if (auto it = group_of.find(p.unsafeGetTensorImpl()); it != group_of.end()) {
      slot.trainable = true;
      slot.group = it->second;
    }
    slots.push_back(std::move(slot));
  }
  return slots;
}

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

at::Tensor block_rows(const ParamSlot& slot, const SlotBlock& block, const at::Tensor& local) {
  return slot.blocks.size() == 1 ? local : local.narrow(0, block.row, block.rows);
}

void load_rows(const checkpoint::DcpReader& reader, const io::checkpoint::StatePath& path, const ParamSlot& slot, const at::Tensor& dest) {
  const std::string key = io::checkpoint::flat_key(path);
  const std::string where = reader.dir() + "/.metadata";
  if (!reader.has(key)) throw std::runtime_error(where + ": the checkpoint has no key '" + key + "' (parameter " + slot.fqn + ")");
  const auto& entry = reader.metadata().entry(key);
  if (!entry.is_tensor || entry.size != slot.global_shape) {
    throw std::runtime_error(where + ": key '" + key + "' has shape " + io::serialization::shape_string(entry.size) + " in the checkpoint but " +
                             io::serialization::shape_string(slot.global_shape) + " in the model");
  }
  if (dest.numel() == 0) return;
  torch::NoGradGuard no_grad;
  for (const SlotBlock& block : slot.blocks) {
    const at::Tensor rows = block_rows(slot, block, dest);
    at::Tensor staging = at::empty(rows.sizes(), rows.options().device(at::kCPU));
    reader.read_block(key, block.offsets, staging);
    rows.copy_(staging);
  }
}

void check_model_fits(const settings::TrainingArguments& args, const checkpoint::CheckpointReader& reader,
                      const std::vector<ParamSlot>& slots) {
  const settings::UnexpectedKeys policy = args.unexpected_keys;
  if (reader.has_object("args")) {
    try {
      check_checkpoint_model(checkpoint::args_json(reader.object("args")), *args.model, reader.dir());
    } catch (const std::runtime_error& e) {
      if (policy == settings::UnexpectedKeys::kRaise) throw;  // only --finetune allows another policy
      spdlog::warn("{}; fine-tuning it anyway (--dist-ckpt-strictness {})", e.what(), args.dist_ckpt_strictness);
    }
  }
  const checkpoint::CheckpointFormat format = reader.format();
  std::vector<std::string> expected;
  for (const auto& slot : slots) {
    expected.push_back(format.model_key(slot.fqn));
    for (const char* state : {"exp_avg", "exp_avg_sq", "step"}) expected.push_back(io::checkpoint::flat_key(format.optimizer_state(slot.fqn, state)));
  }
  for (const auto& key : reader.tensors().metadata().keys()) {
    if (key.rfind(io::checkpoint::flat_key({"rng_state"}) + ".", 0) == 0) expected.push_back(key);
  }
  const std::vector<std::string> unexpected = unexpected_tensors(reader.tensors(), expected);
  if (unexpected.empty() || policy == settings::UnexpectedKeys::kIgnore) return;
  std::string listed;
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) listed += (i ? ", " : "") + unexpected[i];
  if (unexpected.size() > 5) listed += " and " + std::to_string(unexpected.size() - 5) + " more";
  const std::string what = reader.dir() + " has " + std::to_string(unexpected.size()) + " tensors the model does not have: " + listed;
  if (policy == settings::UnexpectedKeys::kLog) return spdlog::warn("{} (ignored: --dist-ckpt-strictness {})", what, args.dist_ckpt_strictness);
  throw std::runtime_error(what + ". Was it saved from another model? To load the tensors the model has and ignore the "
                                  "others, add --finetune --dist-ckpt-strictness log_unexpected");
}

}  // namespace megacpp::runtime
