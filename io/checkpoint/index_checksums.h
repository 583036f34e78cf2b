// Note [Index checksums]
// The files that index a checkpoint (.metadata; for torch_dist also metadata.json and common.pt)
// say where every tensor's bytes are. Edited by hand (two storage offsets swapped, say) they
// would load tensors swapped with no read error, since the rank files' records are intact. So
// megacpp records their CRC-32s, and the iteration, in DIR/megacpp_checksums.json, a file that
// PyTorch and Megatron do not read, and checks them on load: a changed index file, or a directory
// that holds another iteration than the tracker (or --ckpt-step) names, is an error. Checkpoints
// without the file (written by PyTorch or Megatron) load unchecked.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::io::checkpoint {

inline constexpr const char* kIndexChecksumsFile = "megacpp_checksums.json";

// Writes DIR/megacpp_checksums.json for the index files present in `dir`.
void write_index_checksums(const std::string& dir, int64_t iteration);
// Checks DIR/megacpp_checksums.json, if there is one; throws std::runtime_error naming the file
// at fault.
void verify_index_checksums(const std::string& dir, int64_t iteration);

}  // namespace megacpp::io::checkpoint
