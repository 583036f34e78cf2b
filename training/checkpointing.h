// The training state in a checkpoint, Megatron-style: --save/--save-interval/--load and
// friends. Which tensors and values a checkpoint holds and under which keys lives here;
// how they are laid out on disk lives in checkpoint/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_saver.h"
#include "checkpoint/save_lock.h"
#include "settings/arguments.h"
#include "training/optim/loss_scaler.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class AdamW;
}

namespace megacpp::parallel {
class DeviceMesh;
class DistributedRuntime;
}  // namespace megacpp::parallel

namespace megacpp::runtime {
struct ParamSlot;
}

namespace megacpp::training {

// Where training stands: what a resumed run continues from.
struct TrainingProgress {
  int64_t iteration = 0;  // iterations done
  int64_t consumed_train = 0;
  int64_t consumed_valid = 0;
  // The training samples of iterations --fp16 skipped: the learning-rate schedule counts the
  // others (Megatron's opt_param_scheduler num_steps is consumed_train - skipped_samples).
  int64_t skipped_samples = 0;
  std::optional<optim::LossScalerState> loss_scaler;  // with --fp16 / --loss-scale: Megatron's grad_scaler
};

class TrainingCheckpointer {
 public:
  // `async`: --async-save, or ROLL's async_save_ckpt in fsdp2_config.yaml. The checkpoint spans
  // the mesh's ranks (the runtime's first mesh.world_size(): all of them, or a GRPO trainer's
  // beside its rollout workers).
  TrainingCheckpointer(const settings::TrainingArguments& args, parallel::DistributedRuntime& runtime, const parallel::DeviceMesh& mesh,
                       bool async);

  // True when --save is set and `iteration` is a multiple of --save-interval.
  bool due(int64_t iteration) const;
  // Collective: saves model, optimizer (unless --no-save-optim), progress, LR schedule and
  // every rank's RNG to --save (in the background with --async-save).
  void save(const TrainingProgress& progress, torch::nn::Module& model, torch::optim::AdamW& optimizer);
  // Loads --load into the (sharded) model and optimizer, each rank reading only its rows.
  // Returns where to resume; zero when there is nothing to load (a warning says so), for
  // --finetune and for release checkpoints. Under LoRA --load gives the base model and the
  // adapters too when it holds them; --lora-load gives the adapters and where training stands.
  TrainingProgress load(torch::nn::Module& model, torch::optim::AdamW& optimizer);
  // Waits for a background save (call before exiting).
  void finish();

 private:
  // The checkpoint under `root` (given by `flag`); nullopt, after a warning ending with
  // `otherwise`, when there is none and a run may go on without.
  std::optional<checkpoint::CheckpointReader> open(const std::string& root, const std::string& flag,
                                                   const std::string& otherwise) const;
  TrainingProgress resume(const checkpoint::CheckpointReader& reader, const std::vector<runtime::ParamSlot>& slots,
                          torch::optim::AdamW& optimizer);
  void load_optimizer(const checkpoint::CheckpointReader& reader, const std::vector<runtime::ParamSlot>& slots,
                      torch::optim::AdamW& optimizer) const;
  void load_base(const checkpoint::CheckpointReader& reader, const std::vector<runtime::ParamSlot>& base) const;
  // Refuses a checkpoint without adapters, or adapters of another rank, alpha or set of layers;
  // `given` names the flag and root.
  void check_lora_settings(const checkpoint::CheckpointReader& reader, const std::vector<runtime::ParamSlot>& adapters,
                           const std::string& given) const;

  const settings::TrainingArguments& args_;
  parallel::DistributedRuntime& runtime_;
  const parallel::DeviceMesh& mesh_;
  bool async_;
  std::unique_ptr<checkpoint::SaveDirectoryLock> save_lock_;  // rank 0, with --save
  std::unique_ptr<checkpoint::CheckpointSaver> saver_;
};

}  // namespace megacpp::training
