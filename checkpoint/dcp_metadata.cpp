#include "checkpoint/dcp_metadata.h"

#include <stdexcept>
#include <utility>

#include "checkpoint/pickle.h"

namespace megacpp::checkpoint {
namespace {

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFilesystemModule = "torch.distributed.checkpoint.filesystem";

// A dataclass instance as Python pickles it: cls.__new__(cls) then __dict__ (or __setstate__).
PyValue dataclass(const char* module, const char* name, PyValue state) {
  return PyValue::object(PyValue::global(module, name), PyValue::tuple({}), std::move(state), /*newobj=*/true);
}

PyValue str(const std::string& s) { return PyValue::string(s); }

PyValue torch_size(const std::vector<int64_t>& dims) {
  std::vector<PyValue> items;
  for (int64_t d : dims) items.push_back(PyValue::integer(d));
  return PyValue::object(PyValue::global("torch", "Size"), PyValue::tuple({PyValue::tuple(std::move(items))}));
}

PyValue metadata_index(const std::string& key, const std::vector<int64_t>* offsets, int64_t index) {
  std::vector<std::pair<PyValue, PyValue>> state{{str("fqn"), str(key)}};
  if (offsets) state.emplace_back(str("offset"), torch_size(*offsets));
  state.emplace_back(str("index"), PyValue::integer(index));
  return dataclass(kMetadataModule, "MetadataIndex", PyValue::dict(std::move(state)));
}

PyValue storage_info(const DcpStorageInfo& s) {
  return dataclass(kFilesystemModule, "_StorageInfo",
                   PyValue::dict({{str("relative_path"), str(s.relative_path)},
                                  {str("offset"), PyValue::integer(s.offset)},
                                  {str("length"), PyValue::integer(s.length)}}));
}

PyValue tensor_properties(DType dtype) {
  // _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT is an Enum member: pickled as cls(0).
  PyValue contiguous = PyValue::object(PyValue::global(kMetadataModule, "_MEM_FORMAT_ENCODING"),
                                       PyValue::tuple({PyValue::integer(0)}));
  return dataclass(kMetadataModule, "TensorProperties",
                   PyValue::tuple({PyValue::global("torch", dtype_torch_name(dtype)), PyValue::global("torch", "strided"),
                                   PyValue::boolean(false), contiguous, PyValue::boolean(false)}));
}

// --- parsing ------------------------------------------------------------------------------

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The fields of a dataclass instance: its BUILD state (a dict), or empty.
const PyValue* field(const PyValue& obj, const std::string& name) {
  if (obj.kind() != PyValue::Kind::kObject || obj.state().kind() != PyValue::Kind::kDict) return nullptr;
  return obj.state().find(name);
}

const PyValue& required_field(const PyValue& obj, const std::string& name, const std::string& what) {
  const PyValue* v = field(obj, name);
  if (!v) throw ParseError(what + " has no field '" + name + "'");
  return *v;
}

// torch.Size(...) or a plain tuple/list of ints.
std::vector<int64_t> int_list(const PyValue& v, const std::string& what) {
  const PyValue* seq = &v;
  if (v.kind() == PyValue::Kind::kObject && v.is_global("torch", "Size")) {
    if (v.args().items().empty()) return {};
    seq = &v.args().items()[0];
  }
  if (seq->kind() != PyValue::Kind::kTuple && seq->kind() != PyValue::Kind::kList) {
    throw ParseError(what + ": expected a torch.Size, got " + v.repr());
  }
  std::vector<int64_t> out;
  for (const auto& item : seq->items()) out.push_back(item.as_int());
  return out;
}

DType properties_dtype(const PyValue& properties, const std::string& key) {
  const std::string what = "TensorProperties of '" + key + "'";
  const PyValue* dtype = nullptr;
  if (properties.kind() == PyValue::Kind::kObject && properties.state().kind() == PyValue::Kind::kTuple &&
      !properties.state().items().empty()) {
    dtype = &properties.state().items()[0];  // __getstate__ tuple (PyTorch >= 2.0)
  } else {
    dtype = field(properties, "dtype");  // plain __dict__ (older writers)
  }
  if (!dtype || dtype->kind() != PyValue::Kind::kGlobal || dtype->module() != "torch") {
    throw ParseError(what + " has no torch dtype");
  }
  return dtype_from_torch_name(dtype->name());
}

DcpStorageInfo parse_storage_info(const PyValue& v, const std::string& what) {
  DcpStorageInfo s;
  s.relative_path = required_field(v, "relative_path", what).as_string();
  s.offset = required_field(v, "offset", what).as_int();
  s.length = required_field(v, "length", what).as_int();
  if (const PyValue* transforms = field(v, "transform_descriptors");
      transforms && transforms->kind() != PyValue::Kind::kNone && !transforms->items().empty()) {
    throw ParseError(what + " uses stream transforms (compression/encryption extensions), which megacpp does not read");
  }
  if (s.offset < 0 || s.length < 0) throw ParseError(what + " has a negative offset or length");
  return s;
}

}  // namespace

void DcpMetadata::add_tensor_chunk(const std::string& key, DType dtype, const std::vector<int64_t>& size, DcpChunk chunk) {
  auto [it, inserted] = entries_.try_emplace(key);
  DcpEntry& e = it->second;
  if (inserted) {
    keys_.push_back(key);
    e.dtype = dtype;
    e.size = size;
  } else if (!e.is_tensor || e.dtype != dtype || e.size != size) {
    throw std::invalid_argument("checkpoint key '" + key + "' is written with different dtypes or shapes by different ranks");
  }
  e.chunks.push_back(std::move(chunk));
}

void DcpMetadata::add_bytes(const std::string& key, DcpStorageInfo storage) {
  auto [it, inserted] = entries_.try_emplace(key);
  if (!inserted) throw std::invalid_argument("checkpoint key '" + key + "' is written twice");
  keys_.push_back(key);
  it->second.is_tensor = false;
  it->second.chunks.push_back(DcpChunk{{}, {}, std::move(storage)});
}

void DcpMetadata::set_planner_path(const std::string& key, std::vector<std::string> path) {
  planner_paths_[key] = std::move(path);
}

const DcpEntry& DcpMetadata::entry(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw std::out_of_range("the checkpoint has no key '" + key + "'");
  return it->second;
}

std::string DcpMetadata::serialize() const {
  std::vector<std::pair<PyValue, PyValue>> state_dict_metadata, storage_data, planner_data;
  for (const auto& key : keys_) {
    const DcpEntry& e = entries_.at(key);
    if (!e.is_tensor) {
      state_dict_metadata.emplace_back(str(key), dataclass(kMetadataModule, "BytesStorageMetadata", PyValue::none()));
      storage_data.emplace_back(metadata_index(key, nullptr, 0), storage_info(e.chunks.front().storage));
    } else {
      std::vector<PyValue> chunks;
      for (size_t i = 0; i < e.chunks.size(); ++i) {
        const DcpChunk& c = e.chunks[i];
        chunks.push_back(dataclass(kMetadataModule, "ChunkStorageMetadata",
                                   PyValue::dict({{str("offsets"), torch_size(c.offsets)}, {str("sizes"), torch_size(c.sizes)}})));
        storage_data.emplace_back(metadata_index(key, &c.offsets, static_cast<int64_t>(i)), storage_info(c.storage));
      }
      state_dict_metadata.emplace_back(
          str(key), dataclass(kMetadataModule, "TensorStorageMetadata",
                              PyValue::dict({{str("properties"), tensor_properties(e.dtype)},
                                             {str("size"), torch_size(e.size)},
                                             {str("chunks"), PyValue::list(std::move(chunks))}})));
    }
    if (auto p = planner_paths_.find(key); p != planner_paths_.end()) {
      std::vector<PyValue> path;
      for (const auto& part : p->second) path.push_back(str(part));
      planner_data.emplace_back(str(key), PyValue::tuple(std::move(path)));
    }
  }
  PyValue metadata = dataclass(kMetadataModule, "Metadata",
                               PyValue::dict({{str("state_dict_metadata"), PyValue::dict(std::move(state_dict_metadata))},
                                              {str("planner_data"), PyValue::dict(std::move(planner_data))},
                                              {str("storage_data"), PyValue::dict(std::move(storage_data))},
                                              {str("version"), str("1.0.0")}}));
  return pickle(metadata);
}

DcpMetadata DcpMetadata::parse(std::string_view bytes, const std::string& path) {
  try {
    const PyValue root = unpickle(bytes, path);
    if (!root.is_global(kMetadataModule, "Metadata")) {
      throw ParseError("not a torch.distributed.checkpoint Metadata (found " + root.repr() + ")");
    }
    // storage_data: {MetadataIndex: _StorageInfo}, looked up by (key, offsets) as PyTorch does.
    std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorageInfo> storage;
    const PyValue& storage_data = required_field(root, "storage_data", "Metadata");
    for (const auto& [index, info] : storage_data.dict_items()) {
      const std::string key = required_field(index, "fqn", "MetadataIndex").as_string();
      const PyValue* offset = field(index, "offset");
      std::vector<int64_t> offsets;
      if (offset && offset->kind() != PyValue::Kind::kNone) offsets = int_list(*offset, "offset of '" + key + "'");
      storage[{key, offsets}] = parse_storage_info(info, "storage record of '" + key + "'");
    }
    DcpMetadata md;
    for (const auto& [key_value, meta] : required_field(root, "state_dict_metadata", "Metadata").dict_items()) {
      const std::string key = key_value.as_string();
      auto find_storage = [&](const std::vector<int64_t>& offsets) {
        auto it = storage.find({key, offsets});
        if (it == storage.end()) throw ParseError("key '" + key + "' has a chunk with no storage record");
        return it->second;
      };
      if (meta.is_global(kMetadataModule, "BytesStorageMetadata")) {
        md.add_bytes(key, find_storage({}));
        continue;
      }
      if (!meta.is_global(kMetadataModule, "TensorStorageMetadata")) {
        throw ParseError("key '" + key + "' has unknown storage metadata " + meta.repr());
      }
      const DType dtype = properties_dtype(required_field(meta, "properties", key), key);
      const std::vector<int64_t> size = int_list(required_field(meta, "size", key), "size of '" + key + "'");
      md.keys_.push_back(key);
      DcpEntry& e = md.entries_[key];
      e.dtype = dtype;
      e.size = size;
      for (const auto& chunk : required_field(meta, "chunks", key).items()) {
        DcpChunk c;
        c.offsets = int_list(required_field(chunk, "offsets", key), "chunk offsets of '" + key + "'");
        c.sizes = int_list(required_field(chunk, "sizes", key), "chunk sizes of '" + key + "'");
        if (c.offsets.size() != size.size() || c.sizes.size() != size.size()) {
          throw ParseError("key '" + key + "' has a chunk of another rank than its tensor");
        }
        for (size_t d = 0; d < size.size(); ++d) {
          if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] + c.sizes[d] > size[d]) {
            throw ParseError("key '" + key + "' has a chunk outside the tensor");
          }
        }
        c.storage = find_storage(c.offsets);
        e.chunks.push_back(std::move(c));
      }
    }
    if (const PyValue* planner = field(root, "planner_data"); planner && planner->kind() == PyValue::Kind::kDict) {
      for (const auto& [key, path] : planner->dict_items()) {
        if (key.kind() != PyValue::Kind::kString || (path.kind() != PyValue::Kind::kTuple && path.kind() != PyValue::Kind::kList)) continue;
        std::vector<std::string> parts;
        for (const auto& part : path.items()) parts.push_back(part.kind() == PyValue::Kind::kString ? part.as_string() : std::to_string(part.as_int()));
        md.planner_paths_[key.as_string()] = std::move(parts);
      }
    }
    return md;
  } catch (const std::exception& e) {
    const std::string message = e.what();
    if (message.rfind(path, 0) == 0) throw std::runtime_error(message);
    throw std::runtime_error(path + ": " + message);
  }
}

}  // namespace megacpp::checkpoint
