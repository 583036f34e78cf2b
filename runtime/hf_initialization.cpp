#include "runtime/hf_initialization.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "checkpoint/hf_folder.h"
#include "models/registry.h"
#include "runtime/checkpoint_slots.h"

namespace megacpp::runtime {

void load_hf_folder(const std::string& dir, const models::ModelConfig& config, const std::vector<ParamSlot>& slots) {
  const checkpoint::HfFolderWeights weights(dir, models::model_family(config.model_type()), config);
  for (const auto& slot : slots) weights.check(slot.fqn, slot.global_shape);
  spdlog::info("loading the weights of {} (--init-from-hf-path), {} tensors, each value checked finite (safetensors has no "
               "checksum)", dir, slots.size());
  torch::NoGradGuard no_grad;
  for (const auto& slot : slots) {
    if (slot.tensor.numel() == 0) continue;  // a rank past the end of a small parameter
    for (const SlotBlock& block : slot.blocks) {
      const at::Tensor rows = block_rows(slot, block, slot.tensor);
      rows.copy_(weights.block(slot.fqn, slot.global_shape, block.offsets, rows.sizes().vec()));
    }
  }
}

}  // namespace megacpp::runtime
