// Writing and reading the data of a PyTorch Distributed Checkpoint directory: each rank
// writes its items into __{rank}_0.distcp (one `torch.save` record per tensor chunk or
// object, back to back), and one rank writes the `.metadata` that indexes them all.
// Reading looks chunks up in `.metadata` and reads only the byte ranges of the chunks that
// overlap the block a rank asks for: this is what makes loading on another mesh cheap.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "io/checkpoint/dcp_metadata.h"
#include "io/checkpoint/layout.h"
#include "io/serialization/pickle.h"

namespace megacpp::checkpoint {

// A block of a tensor of the global state dict: `local` is the part [offsets, offsets +
// local.sizes()) of a tensor of shape `global_shape`.
struct TensorBlock {
  std::string key;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
  at::Tensor local;
};

// The items one rank writes.
struct RankItems {
  std::vector<TensorBlock> tensors;
  std::vector<std::pair<std::string, io::serialization::PyValue>> objects;
  std::map<std::string, io::checkpoint::StatePath> planner_paths;  // key -> nested state-dict path

  // The block [offsets, offsets + local.sizes()) of the tensor at `path`.
  void add_block(const io::checkpoint::StatePath& path, std::vector<int64_t> global_shape, std::vector<int64_t> offsets, at::Tensor local);
  // `value` at `path`, split as DCP's flatten_state_dict splits a nested state dict: a dict
  // is walked into (one item per leaf), a tensor is stored whole, anything else (a list
  // without tensors or dicts included) is an object.
  void add_flattened(const io::checkpoint::StatePath& path, const io::serialization::PyValue& value);

  // Copies every tensor to contiguous CPU memory, so the items can be written while
  // training goes on (async save).
  RankItems snapshot() const;
};

// Writes `items` to DIR/__{rank}_0.distcp (fsync'ed) and returns the metadata of what it
// wrote, for the coordinator to merge.
io::checkpoint::DcpMetadata write_rank_file(const std::string& dir, int rank, const RankItems& items);
// Adds every key of `part` to `into`.
void merge_metadata(io::checkpoint::DcpMetadata& into, const io::checkpoint::DcpMetadata& part);
// Writes DIR/.metadata atomically.
void write_metadata_file(const std::string& dir, const io::checkpoint::DcpMetadata& metadata);

class DcpReader {
 public:
  // Reads and checks DIR/.metadata.
  explicit DcpReader(std::string dir);

  const std::string& dir() const { return dir_; }
  const io::checkpoint::DcpMetadata& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return metadata_.contains(key); }

  // Fills `dest` with the block of tensor `key` that starts at `offsets` (dest's shape is
  // the block's), converting the dtype. Throws naming the key and the file when the key is
  // missing or not a tensor, the shapes disagree, a chunk is missing, or a stored record is
  // truncated or corrupted.
  void read_block(const std::string& key, const std::vector<int64_t>& offsets, const at::Tensor& dest) const;
  // The whole tensor `key`, or the object stored under `key`.
  at::Tensor read_tensor(const std::string& key) const;
  io::serialization::PyValue read_object(const std::string& key) const;

 private:
  std::string metadata_path() const;
  // The entry of `key`; throws naming .metadata when it is missing or of the other kind.
  const io::checkpoint::DcpEntry& find(const std::string& key, bool tensor) const;
  std::string read_record(const std::string& key, const io::checkpoint::DcpStorageInfo& storage) const;
  std::string dir_;
  io::checkpoint::DcpMetadata metadata_;
};

}  // namespace megacpp::checkpoint
