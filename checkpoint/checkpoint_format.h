// Note [Checkpoint formats]
// torch_dcp (PyTorch DCP, as dcp.save writes FSDP2's state dict) and torch_dist (Megatron's
// layout) share the rank files, the .metadata index and the directory layout; they differ only
// in how keys are named and where the state that is not sharded goes. This object owns those
// differences, so nothing else asks which format it is: --ckpt-format is parsed into one once
// and carried as a value.
//   torch_dcp:  model.<fqn>, optim.state.<fqn>.<exp_avg|exp_avg_sq|step> and
//               optim.param_groups.<fqn>.<hp> per parameter; unsharded state as DCP items.
//   torch_dist: <fqn>, optimizer.state.<exp_avg|exp_avg_sq>.<fqn>; unsharded state (and the
//               optimizer's param groups with their step) in common.pt, plus metadata.json.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint/layout.h"
#include "io/serialization/pickle.h"

namespace megacpp::checkpoint {

struct RankItems;

// The state of a save that is not sharded (the coordinator's), by key: torch_dist writes it as
// common.pt; torch_dcp keeps it among the DCP items.
using UnshardedState = std::vector<std::pair<std::string, io::serialization::PyValue>>;

class CheckpointFormat {
 public:
  static CheckpointFormat torch_dcp() { return CheckpointFormat(Kind::kTorchDcp); }
  static CheckpointFormat torch_dist() { return CheckpointFormat(Kind::kTorchDist); }
  // "torch_dcp" / "torch_dist"; throws std::invalid_argument naming --ckpt-format otherwise.
  static CheckpointFormat named(const std::string& name);
  // The format of the checkpoint in `dir`, from its files: metadata.json names torch_dist, a
  // lone .metadata is torch_dcp. Throws naming the directory when it is neither.
  static CheckpointFormat of_directory(const std::string& dir);

  CheckpointFormat() = default;  // torch_dist, Megatron's default
  std::string name() const;
  bool operator==(const CheckpointFormat& other) const { return kind_ == other.kind_; }
  bool operator!=(const CheckpointFormat& other) const { return kind_ != other.kind_; }

  // Where parameter `fqn` is: {"model", fqn} (PyTorch's {"model": state_dict}) or {fqn}.
  io::checkpoint::StatePath model(const std::string& fqn) const;
  std::string model_key(const std::string& fqn) const { return io::checkpoint::flat_key(model(fqn)); }
  // AdamW state `name` (exp_avg, exp_avg_sq; torch_dcp also step) of parameter `fqn`.
  io::checkpoint::StatePath optimizer_state(const std::string& fqn, const std::string& name) const;
  // torch_dcp keeps AdamW's step and its group's hyperparameters per parameter (PyTorch's
  // flattened optimizer state dict), at param_group(); torch_dist keeps the param groups, with
  // the step, as "optimizer" in common.pt.
  bool optimizer_groups_per_parameter() const { return kind_ == Kind::kTorchDcp; }
  io::checkpoint::StatePath param_group(const std::string& fqn, const std::string& hyperparameter) const;

  // Adds state that is not sharded (the coordinator's) to a save: to `unsharded` (torch_dist)
  // or, a dict split into one item per leaf as PyTorch's dcp.save splits it, to `items`.
  void add_unsharded(RankItems& items, UnshardedState& unsharded, const std::string& key,
                     io::serialization::PyValue value) const;
  // Writes the files this format keeps beside .metadata in `dir` (torch_dist: common.pt with
  // `unsharded`, and metadata.json).
  void write_index_files(const UnshardedState& unsharded, const std::string& dir) const;
  // The unsharded state of the checkpoint in `dir` as one dict (torch_dist's common.pt);
  // nullopt where it is kept as DCP items.
  std::optional<io::serialization::PyValue> read_common(const std::string& dir) const;

 private:
  enum class Kind { kTorchDcp, kTorchDist };
  explicit CheckpointFormat(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::kTorchDist;
};

}  // namespace megacpp::checkpoint
