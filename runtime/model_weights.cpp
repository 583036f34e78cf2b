#include "runtime/model_weights.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_reader.h"
#include "io/checkpoint/layout.h"
#include "runtime/checkpoint_slots.h"
#include "runtime/hf_initialization.h"

namespace megacpp::runtime {
namespace {

checkpoint::CheckpointReader open_checkpoint(const std::string& root, const std::string& flag, int64_t step) {
  auto reader = checkpoint::CheckpointReader::open(root, step >= 0 ? std::optional<int64_t>(step) : std::nullopt, flag);
  if (!reader) throw std::runtime_error(flag + " " + root + " has no checkpoint (no " + io::checkpoint::tracker_path(root) + ")");
  return std::move(*reader);
}

void load_from(const checkpoint::CheckpointReader& reader, const std::vector<ParamSlot>& slots) {
  for (const auto& slot : slots) {
    if (!reader.tensors().has(reader.format().model_key(slot.fqn))) {
      throw std::runtime_error(reader.dir() + " has no tensor " + reader.format().model_key(slot.fqn) + " of the model");
    }
  }
  for (const auto& slot : slots) load_rows(reader.tensors(), reader.format().model(slot.fqn), slot, slot.tensor);
}

}  // namespace

void load_model_weights(const settings::TrainingArguments& args, const parallel::DeviceMesh& mesh,
                        torch::nn::Module& model) {
  if (args.load.empty() && args.init_from_hf_path.empty()) throw std::invalid_argument("no --load or --init-from-hf-path to load the weights from");
  const std::vector<ParamSlot> slots = param_slots(model, nullptr, mesh);
  std::vector<ParamSlot> base, adapters;
  for (const auto& slot : slots) (slot.adapter ? adapters : base).push_back(slot);
  // --ckpt-step is the adapters' iteration when --lora-load gives them, as in training.
  const bool step_of_adapters = !args.lora_load.empty();
  if (!args.load.empty()) {
    const auto reader = open_checkpoint(args.load, "--load", step_of_adapters ? -1 : args.ckpt_step);
    check_model_fits(args, reader, slots);
    spdlog::info("loading the weights of {} ({})", reader.dir(), reader.format().name());
    load_from(reader, base);
    if (!adapters.empty() && args.lora_load.empty()) {
      if (!reader.tensors().has(reader.format().model_key(adapters.front().fqn))) {
        throw std::runtime_error("--lora-rank " + std::to_string(args.lora.rank) + ": --load " + args.load +
                                 " holds no LoRA adapters; give their checkpoint with --lora-load");
      }
      load_from(reader, adapters);
    }
  } else {
    load_hf_folder(args.init_from_hf_path, *args.model, base);
    if (!adapters.empty() && args.lora_load.empty()) {
      throw std::runtime_error("--lora-rank " + std::to_string(args.lora.rank) + " with --init-from-hf-path: the adapters come from --lora-load");
    }
  }
  if (adapters.empty() || args.lora_load.empty()) return;
  const auto reader = open_checkpoint(args.lora_load, "--lora-load", args.ckpt_step);
  spdlog::info("loading the LoRA adapters of {}", reader.dir());
  load_from(reader, adapters);
}

}  // namespace megacpp::runtime
