#include "checkpoint/dcp_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <ATen/ATen.h>

#include "io/checkpoint/layout.h"
#include "checkpoint/tensor_convert.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string rank_file_name(int rank) { return "__" + std::to_string(rank) + "_0.distcp"; }

// DCP's _is_terminal: a list is a leaf unless it holds a tensor, a dict or a non-leaf list.
bool is_leaf(const io::serialization::PyValue& value) {
  if (value.kind() == io::serialization::PyValue::Kind::kDict) return false;
  if (value.kind() != io::serialization::PyValue::Kind::kList) return true;
  for (const auto& item : value.items()) {
    if (item.kind() == io::serialization::PyValue::Kind::kTensor || !is_leaf(item)) return false;
  }
  return true;
}

}  // namespace

void RankItems::add_block(const io::checkpoint::StatePath& path, std::vector<int64_t> global_shape, std::vector<int64_t> offsets, at::Tensor local) {
  const std::string key = io::checkpoint::flat_key(path);
  planner_paths[key] = path;
  tensors.push_back({key, std::move(global_shape), std::move(offsets), std::move(local)});
}

void RankItems::add_flattened(const io::checkpoint::StatePath& path, const io::serialization::PyValue& value) {
  auto child = [&](std::string part) {
    io::checkpoint::StatePath longer = path;
    longer.push_back(std::move(part));
    return longer;
  };
  if (value.kind() == io::serialization::PyValue::Kind::kDict) {
    for (const auto& [name, item] : value.dict_items()) {
      add_flattened(child(name.kind() == io::serialization::PyValue::Kind::kString ? name.as_string() : name.repr()), item);
    }
  } else if (!is_leaf(value)) {
    // DCP would walk into it with integer path parts, which io::checkpoint::StatePath does not hold.
    throw std::invalid_argument("checkpoint item '" + io::checkpoint::flat_key(path) + "': a list holding tensors or dicts cannot be saved");
  } else if (value.kind() == io::serialization::PyValue::Kind::kTensor) {
    at::Tensor whole = from_raw(value.tensor());
    add_block(path, whole.sizes().vec(), std::vector<int64_t>(static_cast<size_t>(whole.dim()), 0), whole);
  } else {
    const std::string key = io::checkpoint::flat_key(path);
    planner_paths[key] = path;
    objects.emplace_back(key, value);
  }
}

RankItems RankItems::snapshot() const {
  RankItems copy = *this;
  for (auto& t : copy.tensors) t.local = t.local.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
  return copy;
}

io::checkpoint::DcpMetadata write_rank_file(const std::string& dir, int rank, const RankItems& items) {
  const std::string name = rank_file_name(rank);
  io::serialization::AtomicFile file((fs::path(dir) / name).string());
  io::checkpoint::DcpMetadata written;
  int64_t offset = 0;
  auto append = [&](const std::string& bytes) {
    io::checkpoint::DcpStorageInfo storage{name, offset, static_cast<int64_t>(bytes.size())};
    file.write(bytes.data(), bytes.size());
    offset += storage.length;
    return storage;
  };
  for (const auto& [key, value] : items.objects) written.add_bytes(key, append(io::serialization::torch_save(value)));
  for (const auto& t : items.tensors) {
    const io::serialization::RawTensor raw = to_raw(t.local);
    io::checkpoint::DcpChunk chunk{t.offsets, raw.sizes, {}};
    chunk.storage = append(io::serialization::torch_save(io::serialization::PyValue::tensor(std::make_shared<io::serialization::RawTensor>(raw))));
    written.add_tensor_chunk(t.key, raw.dtype, t.global_shape, std::move(chunk));
  }
  for (const auto& [key, path] : items.planner_paths) written.set_planner_path(key, path);
  file.commit();
  return written;
}

void merge_metadata(io::checkpoint::DcpMetadata& into, const io::checkpoint::DcpMetadata& part) {
  for (const auto& key : part.keys()) {
    const io::checkpoint::DcpEntry& e = part.entry(key);
    if (!e.is_tensor) {
      into.add_bytes(key, e.chunks.front().storage);
      continue;
    }
    for (const auto& chunk : e.chunks) into.add_tensor_chunk(key, e.dtype, e.size, chunk);
  }
  for (const auto& [key, path] : part.planner_paths()) into.set_planner_path(key, path);
}

void write_metadata_file(const std::string& dir, const io::checkpoint::DcpMetadata& metadata) {
  io::serialization::write_file_atomically((fs::path(dir) / ".metadata").string(), metadata.serialize());
}

DcpReader::DcpReader(std::string dir) : dir_(std::move(dir)) {
  metadata_ = io::checkpoint::DcpMetadata::parse(io::checkpoint::read_whole_file(metadata_path()), metadata_path());
}

std::string DcpReader::metadata_path() const { return (fs::path(dir_) / ".metadata").string(); }

const io::checkpoint::DcpEntry& DcpReader::find(const std::string& key, bool tensor) const {
  if (!metadata_.contains(key)) throw std::runtime_error(metadata_path() + ": the checkpoint has no key '" + key + "'");
  const io::checkpoint::DcpEntry& entry = metadata_.entry(key);
  if (entry.is_tensor != tensor) {
    throw std::runtime_error(metadata_path() + ": key '" + key + "' is " + (tensor ? "an object, not a tensor" : "a tensor, not an object"));
  }
  return entry;
}

std::string DcpReader::read_record(const std::string& key, const io::checkpoint::DcpStorageInfo& storage) const {
  const std::string path = (fs::path(dir_) / storage.relative_path).string();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + "), needed for key '" + key + "'");
  }
  struct stat st {};
  ::fstat(fd, &st);
  if (storage.offset + storage.length > st.st_size) {
    ::close(fd);
    throw std::runtime_error(path + " is truncated: key '" + key + "' needs bytes [" + std::to_string(storage.offset) +
                             ", " + std::to_string(storage.offset + storage.length) + ") but the file has " +
                             std::to_string(st.st_size));
  }
  std::string bytes(static_cast<size_t>(storage.length), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, storage.offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error(path + ": read error for key '" + key + "'");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

void DcpReader::read_block(const std::string& key, const std::vector<int64_t>& offsets, const at::Tensor& dest) const {
  const std::string where = metadata_path();
  const io::checkpoint::DcpEntry& entry = find(key, /*tensor=*/true);
  const std::vector<int64_t> block = dest.sizes().vec();
  if (block.size() != entry.size.size() || offsets.size() != entry.size.size()) {
    throw std::runtime_error(where + ": key '" + key + "' has shape " + io::serialization::shape_string(entry.size) + " in the checkpoint, the model wants a block " +
                             io::serialization::shape_string(block) + " of a tensor with " + std::to_string(offsets.size()) + " dimensions");
  }
  for (size_t d = 0; d < block.size(); ++d) {
    if (offsets[d] < 0 || offsets[d] + block[d] > entry.size[d]) {
      throw std::runtime_error(where + ": key '" + key + "' has shape " + io::serialization::shape_string(entry.size) + " in the checkpoint, which does not hold the block " +
                               io::serialization::shape_string(block) + " at " + io::serialization::shape_string(offsets) + " the model needs");
    }
  }
  int64_t covered = 0;  // elements of the block filled, to find holes
  for (const io::checkpoint::DcpChunk& chunk : entry.chunks) {
    // The intersection of the chunk and the block, per dimension.
    std::vector<int64_t> begin(block.size()), length(block.size());
    bool empty = false;
    for (size_t d = 0; d < block.size(); ++d) {
      begin[d] = std::max(offsets[d], chunk.offsets[d]);
      const int64_t end = std::min(offsets[d] + block[d], chunk.offsets[d] + chunk.sizes[d]);
      length[d] = end - begin[d];
      empty = empty || length[d] <= 0;
    }
    if (empty && !block.empty()) continue;
    const std::string file = (fs::path(dir_) / chunk.storage.relative_path).string();
    const std::string what = file + ", key '" + key + "'";
    const io::serialization::PyValue loaded = io::serialization::torch_load(read_record(key, chunk.storage), what);
    if (loaded.kind() != io::serialization::PyValue::Kind::kTensor) throw std::runtime_error(what + ": the record is not a tensor");
    const io::serialization::RawTensor& raw = loaded.tensor();
    if (raw.sizes != chunk.sizes || raw.dtype != entry.dtype) {
      throw std::runtime_error(what + ": the record holds a " + io::serialization::dtype_torch_name(raw.dtype) + " tensor of shape " +
                               io::serialization::shape_string(raw.sizes) + ", .metadata says " + io::serialization::dtype_torch_name(entry.dtype) + " " +
                               io::serialization::shape_string(chunk.sizes));
    }
    at::Tensor source = from_raw(raw), target = dest;
    int64_t numel = 1;
    for (size_t d = 0; d < block.size(); ++d) {
      source = source.narrow(static_cast<int64_t>(d), begin[d] - chunk.offsets[d], length[d]);
      target = target.narrow(static_cast<int64_t>(d), begin[d] - offsets[d], length[d]);
      numel *= length[d];
    }
    target.copy_(source);
    covered += numel;
  }
  if (covered != dest.numel()) {
    throw std::runtime_error(where + ": the chunks of key '" + key + "' cover " + std::to_string(covered) + " of the " +
                             std::to_string(dest.numel()) + " elements needed (a missing or overlapping shard)");
  }
}

at::Tensor DcpReader::read_tensor(const std::string& key) const {
  const io::checkpoint::DcpEntry& entry = find(key, /*tensor=*/true);
  at::Tensor out = at::empty(entry.size, at::TensorOptions().dtype(to_scalar_type(entry.dtype)));
  read_block(key, std::vector<int64_t>(entry.size.size(), 0), out);
  return out;
}

io::serialization::PyValue DcpReader::read_object(const std::string& key) const {
  const io::checkpoint::DcpEntry& entry = find(key, /*tensor=*/false);
  const io::checkpoint::DcpStorageInfo& storage = entry.chunks.front().storage;
  return io::serialization::torch_load(read_record(key, storage), (fs::path(dir_) / storage.relative_path).string() + ", key '" + key + "'");
}

}  // namespace megacpp::checkpoint
