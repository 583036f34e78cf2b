// The `.metadata` file of a PyTorch Distributed Checkpoint (torch.distributed.checkpoint,
// FileSystemWriter), torch-free. It is `pickle.dump(Metadata)` of these dataclasses
// (torch/distributed/checkpoint/metadata.py and filesystem.py):
//   Metadata(state_dict_metadata = {key: TensorStorageMetadata | BytesStorageMetadata},
//            planner_data = {key: (path, components)},     # DefaultSavePlanner's flattening
//            storage_data = {MetadataIndex(key, offsets): _StorageInfo(file, offset, length)},
//            version = "1.0.0")
//   TensorStorageMetadata(properties = TensorProperties, size = torch.Size,
//                         chunks = [ChunkStorageMetadata(offsets, sizes)])
//   TensorProperties pickles as the tuple (dtype, layout, requires_grad,
//                    _MEM_FORMAT_ENCODING, pin_memory) through its __getstate__.
// Each stored item is `torch.save` bytes at [offset, offset + length) of `file`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/serialization/torch_save.h"

namespace megacpp::io::checkpoint {

// Where one item lives: `length` bytes at `offset` of `relative_path` (e.g. "__0_0.distcp").
struct DcpStorageInfo {
  std::string relative_path;
  int64_t offset = 0;
  int64_t length = 0;
};

// One stored piece of a tensor: the block [offsets, offsets + sizes) of the global tensor.
struct DcpChunk {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  DcpStorageInfo storage;
};

struct DcpEntry {
  bool is_tensor = true;
  serialization::DType dtype = serialization::DType::kFloat32;  // tensors only
  std::vector<int64_t> size;      // tensors only: the global shape
  std::vector<DcpChunk> chunks;   // tensors: the pieces; bytes: one chunk with empty offsets
};

class DcpMetadata {
 public:
  // Adds (or extends) tensor `key` of global `size` with one chunk.
  void add_tensor_chunk(const std::string& key, serialization::DType dtype, const std::vector<int64_t>& size, DcpChunk chunk);
  void add_bytes(const std::string& key, DcpStorageInfo storage);
  // DefaultSavePlanner's record of how a flattened key maps back into the nested state dict
  // (e.g. "model.layers.0.weight" -> ("model", "layers.0.weight")); used by PyTorch's
  // dcp_to_torch_save. Optional.
  void set_planner_path(const std::string& key, std::vector<std::string> path);

  const std::vector<std::string>& keys() const { return keys_; }  // in insertion order
  const std::map<std::string, std::vector<std::string>>& planner_paths() const { return planner_paths_; }
  bool contains(const std::string& key) const { return entries_.count(key) > 0; }
  // Throws std::out_of_range naming the key.
  const DcpEntry& entry(const std::string& key) const;

  // The pickle bytes PyTorch's FileSystemReader.read_metadata loads.
  std::string serialize() const;
  // Parses a `.metadata` file's bytes; `path` names the file in errors. Checks that every
  // chunk lies inside its tensor and has a storage record.
  static DcpMetadata parse(std::string_view bytes, const std::string& path);

 private:
  std::vector<std::string> keys_;
  std::map<std::string, DcpEntry> entries_;
  std::map<std::string, std::vector<std::string>> planner_paths_;
};

}  // namespace megacpp::io::checkpoint
