// Opening the checkpoint --load names: the latest (or --ckpt-step N) under a Megatron
// layout, in whichever format its files say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/dcp_io.h"
#include "io/checkpoint/layout.h"

namespace megacpp::checkpoint {

class CheckpointReader {
 public:
  // The checkpoint of iteration `step` (or the tracker's) under `root`; nullopt when `root`
  // has no tracker file and no step is asked for. Throws naming the directory or file when
  // the checkpoint asked for is missing or unreadable.
  // `flag` names the root in messages.
  static std::optional<CheckpointReader> open(const std::string& root, std::optional<int64_t> step,
                                              const std::string& flag = "--load");
  // A checkpoint directory itself (iter_N or release).
  explicit CheckpointReader(const std::string& dir, int64_t iteration);

  const std::string& dir() const { return dcp_.dir(); }
  CheckpointFormat format() const { return format_; }
  int64_t iteration() const { return iteration_; }  // io::checkpoint::kReleaseIteration for release
  const DcpReader& tensors() const { return dcp_; }

  // Non-sharded state: common.pt's entries for torch_dist, DCP objects for torch_dcp.
  bool has_object(const std::string& key) const;
  io::serialization::PyValue object(const std::string& key) const;

 private:
  CheckpointFormat format_;
  int64_t iteration_;
  DcpReader dcp_;
  std::optional<io::serialization::PyValue> common_;  // torch_dist's common.pt
};

}  // namespace megacpp::checkpoint
