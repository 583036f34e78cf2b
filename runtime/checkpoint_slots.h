// The model's parameters as a checkpoint holds them: each one's key, this rank's rows, whether
// this rank writes them and whether the optimizer trains it (frozen parameters, LoRA's base,
// hold no optimizer state). checkpointing.cpp decides what to save and load from these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint/checkpoint_reader.h"
#include "settings/arguments.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class AdamW;
class AdamWParamState;
}  // namespace torch::optim

namespace megacpp::parallel {
class DeviceMesh;
}

namespace megacpp::runtime {

// Where rows [row, row + rows) of a rank's part sit in the whole parameter: at `offsets`.
struct SlotBlock {
  int64_t row = 0, rows = 0;
  std::vector<int64_t> offsets;
};

// One parameter and this rank's part of it (its rows under FSDP2, a block of a TP slice's rows).
struct ParamSlot {
  std::string fqn;
  at::Tensor tensor;  // the sharded fp32 master (or the whole parameter without FSDP)
  std::vector<int64_t> global_shape;  // of the whole parameter
  // Where this rank's part sits: one block of all its rows, or for a TP slice of a parameter in
  // parts (Note [Tensor parallelism]) a block per part its rows reach.
  std::vector<SlotBlock> blocks;
  bool writes = false;     // the one replica that saves this part
  bool trainable = false;  // in an optimizer param group (frozen parameters are not)
  size_t group = 0;        // that optimizer param group
  bool adapter = false;    // a LoRA adapter's (models::is_lora_parameter)
};

// Every parameter of `model` once, in named_parameters order; none trainable without an
// `optimizer` (a forward-only run).
std::vector<ParamSlot> param_slots(torch::nn::Module& model, const torch::optim::AdamW* optimizer,
                                   const parallel::DeviceMesh& mesh);

// The AdamW state of `p`, created (zeros, step 0) when the optimizer has not stepped yet.
torch::optim::AdamWParamState& adam_state(torch::optim::AdamW& optimizer, const at::Tensor& p);

// `local` (this rank's part of the slot's parameter, or a tensor of its shape) cut into the
// slot's blocks: each block's rows.
at::Tensor block_rows(const ParamSlot& slot, const SlotBlock& block, const at::Tensor& local);

// Reads this rank's rows of the tensor at `path` into `dest`, checking the global shape first.
void load_rows(const checkpoint::DcpReader& reader, const io::checkpoint::StatePath& path, const ParamSlot& slot,
               const at::Tensor& dest);

// Refuses a checkpoint of another model: other `args`, or tensors the model does not have
// (--dist-ckpt-strictness decides).
void check_model_fits(const settings::TrainingArguments& args, const checkpoint::CheckpointReader& reader,
                      const std::vector<ParamSlot>& slots);

}  // namespace megacpp::runtime
