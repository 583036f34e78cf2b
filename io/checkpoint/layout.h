// Megatron's checkpoint directory layout:
//   SAVE/latest_checkpointed_iteration.txt   "100" (or "release" for converted weights)
//   SAVE/iter_0000100/                       one checkpoint, in one of two formats:
//     torch_dcp:  .metadata + __{rank}_0.distcp                 (PyTorch DCP)
//     torch_dist: metadata.json + common.pt + .metadata + __{rank}_0.distcp (Megatron)
//   SAVE/release/                            weights imported from elsewhere (iteration 0)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/serialization/atomic_file.h"

namespace megacpp::io::checkpoint {

inline constexpr int64_t kReleaseIteration = -1;  // the "release" checkpoint
inline constexpr double kCheckpointVersion = 3.0;  // Megatron's checkpoint_version

// A place in a nested state dict, e.g. {"model", "layers.0.mlp.up_proj.weight"}. DCP stores
// each item under the path's parts joined by '.' (flat_key) and keeps the path itself
// (planner_data), so PyTorch can rebuild the nesting.
using StatePath = std::vector<std::string>;
std::string flat_key(const StatePath& path);

std::string tracker_path(const std::string& root);
// SAVE/iter_0000100, or SAVE/release for kReleaseIteration.
std::string checkpoint_dir(const std::string& root, int64_t iteration);
// Where a second save of an iteration keeps the first copy meanwhile: DIR.old (Note
// [Re-saving an iteration] in checkpoint_saver.cpp).
inline std::string previous_copy_dir(const std::string& dir) { return dir + ".old"; }

// The iteration the tracker file names; nullopt when there is no tracker file. Throws
// naming the file when it exists but holds neither a number nor "release".
std::optional<int64_t> read_tracker(const std::string& root);
// Replaces the tracker atomically (write a temporary file, fsync, rename).
void write_tracker(const std::string& root, int64_t iteration);

std::string read_whole_file(const std::string& path);

}  // namespace megacpp::io::checkpoint
