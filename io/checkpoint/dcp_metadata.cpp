#include "io/checkpoint/dcp_metadata.h"

#include <stdexcept>
#include <utility>

#include "io/serialization/pickle.h"

namespace megacpp::io::checkpoint {
namespace {

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFilesystemModule = "torch.distributed.checkpoint.filesystem";

// A dataclass instance as Python pickles it: cls.__new__(cls) then __dict__ (or __setstate__).
serialization::PyValue dataclass(const char* module, const char* name, serialization::PyValue state) {
  return serialization::PyValue::object(serialization::PyValue::global(module, name), serialization::PyValue::tuple({}), std::move(state), /*newobj=*/true);
}

serialization::PyValue str(const std::string& s) { return serialization::PyValue::string(s); }

serialization::PyValue torch_size(const std::vector<int64_t>& dims) {
  std::vector<serialization::PyValue> items;
  for (int64_t d : dims) items.push_back(serialization::PyValue::integer(d));
  return serialization::PyValue::object(serialization::PyValue::global("torch", "Size"), serialization::PyValue::tuple({serialization::PyValue::tuple(std::move(items))}));
}

serialization::PyValue metadata_index(const std::string& key, const std::vector<int64_t>* offsets, int64_t index) {
  std::vector<std::pair<serialization::PyValue, serialization::PyValue>> state{{str("fqn"), str(key)}};
  if (offsets) state.emplace_back(str("offset"), torch_size(*offsets));
  state.emplace_back(str("index"), serialization::PyValue::integer(index));
  return dataclass(kMetadataModule, "MetadataIndex", serialization::PyValue::dict(std::move(state)));
}

serialization::PyValue storage_info(const DcpStorageInfo& s) {
  return dataclass(kFilesystemModule, "_StorageInfo",
                   serialization::PyValue::dict({{str("relative_path"), str(s.relative_path)},
                                  {str("offset"), serialization::PyValue::integer(s.offset)},
                                  {str("length"), serialization::PyValue::integer(s.length)}}));
}

serialization::PyValue tensor_properties(serialization::DType dtype) {
  // _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT is an Enum member: pickled as cls(0).
  serialization::PyValue contiguous = serialization::PyValue::object(serialization::PyValue::global(kMetadataModule, "_MEM_FORMAT_ENCODING"),
                                       serialization::PyValue::tuple({serialization::PyValue::integer(0)}));
  return dataclass(kMetadataModule, "TensorProperties",
                   serialization::PyValue::tuple({serialization::PyValue::global("torch", serialization::dtype_torch_name(dtype)), serialization::PyValue::global("torch", "strided"),
                                   serialization::PyValue::boolean(false), contiguous, serialization::PyValue::boolean(false)}));
}

// --- parsing ------------------------------------------------------------------------------

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The fields of a dataclass instance: its BUILD state (a dict), or empty.
const serialization::PyValue* field(const serialization::PyValue& obj, const std::string& name) {
  if (obj.kind() != serialization::PyValue::Kind::kObject || obj.state().kind() != serialization::PyValue::Kind::kDict) return nullptr;
  return obj.state().find(name);
}

const serialization::PyValue& required_field(const serialization::PyValue& obj, const std::string& name, const std::string& what) {
  const serialization::PyValue* v = field(obj, name);
  if (!v) throw ParseError(what + " has no field '" + name + "'");
  return *v;
}

// torch.Size(...) or a plain tuple/list of ints.
std::vector<int64_t> int_list(const serialization::PyValue& v, const std::string& what) {
  const serialization::PyValue* seq = &v;
  if (v.kind() == serialization::PyValue::Kind::kObject && v.is_global("torch", "Size")) {
    if (v.args().items().empty()) return {};
    seq = &v.args().items()[0];
  }
  if (seq->kind() != serialization::PyValue::Kind::kTuple && seq->kind() != serialization::PyValue::Kind::kList) {
    throw ParseError(what + ": expected a torch.Size, got " + v.repr());
  }
  std::vector<int64_t> out;
  for (const auto& item : seq->items()) out.push_back(item.as_int());
  return out;
}

serialization::DType properties_dtype(const serialization::PyValue& properties, const std::string& key) {
  const std::string what = "TensorProperties of '" + key + "'";
  const serialization::PyValue* dtype = nullptr;
  if (properties.kind() == serialization::PyValue::Kind::kObject && properties.state().kind() == serialization::PyValue::Kind::kTuple &&
      !properties.state().items().empty()) {
    dtype = &properties.state().items()[0];  // __getstate__ tuple (PyTorch >= 2.0)
  } else {
    dtype = field(properties, "dtype");  // plain __dict__ (older writers)
  }
  if (!dtype || dtype->kind() != serialization::PyValue::Kind::kGlobal || dtype->module() != "torch") {
    throw ParseError(what + " has no torch dtype");
  }
  return serialization::dtype_from_torch_name(dtype->name());
}

DcpStorageInfo parse_storage_info(const serialization::PyValue& v, const std::string& what) {
  DcpStorageInfo s;
  s.relative_path = required_field(v, "relative_path", what).as_string();
  s.offset = required_field(v, "offset", what).as_int();
  s.length = required_field(v, "length", what).as_int();
  if (const serialization::PyValue* transforms = field(v, "transform_descriptors");
      transforms && transforms->kind() != serialization::PyValue::Kind::kNone && !transforms->items().empty()) {
    throw ParseError(what + " uses stream transforms (compression/encryption extensions), which megacpp does not read");
  }
  if (s.offset < 0 || s.length < 0) throw ParseError(what + " has a negative offset or length");
  return s;
}

}  // namespace

void DcpMetadata::add_tensor_chunk(const std::string& key, serialization::DType dtype, const std::vector<int64_t>& size, DcpChunk chunk) {
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
  std::vector<std::pair<serialization::PyValue, serialization::PyValue>> state_dict_metadata, storage_data, planner_data;
  for (const auto& key : keys_) {
    const DcpEntry& e = entries_.at(key);
    if (!e.is_tensor) {
      state_dict_metadata.emplace_back(str(key), dataclass(kMetadataModule, "BytesStorageMetadata", serialization::PyValue::none()));
      storage_data.emplace_back(metadata_index(key, nullptr, 0), storage_info(e.chunks.front().storage));
    } else {
      std::vector<serialization::PyValue> chunks;
      for (size_t i = 0; i < e.chunks.size(); ++i) {
        const DcpChunk& c = e.chunks[i];
        chunks.push_back(dataclass(kMetadataModule, "ChunkStorageMetadata",
                                   serialization::PyValue::dict({{str("offsets"), torch_size(c.offsets)}, {str("sizes"), torch_size(c.sizes)}})));
        storage_data.emplace_back(metadata_index(key, &c.offsets, static_cast<int64_t>(i)), storage_info(c.storage));
      }
      state_dict_metadata.emplace_back(
          str(key), dataclass(kMetadataModule, "TensorStorageMetadata",
                              serialization::PyValue::dict({{str("properties"), tensor_properties(e.dtype)},
                                             {str("size"), torch_size(e.size)},
                                             {str("chunks"), serialization::PyValue::list(std::move(chunks))}})));
    }
    if (auto p = planner_paths_.find(key); p != planner_paths_.end()) {
      std::vector<serialization::PyValue> path;
      for (const auto& part : p->second) path.push_back(str(part));
      planner_data.emplace_back(str(key), serialization::PyValue::tuple(std::move(path)));
    }
  }
  serialization::PyValue metadata = dataclass(kMetadataModule, "Metadata",
                               serialization::PyValue::dict({{str("state_dict_metadata"), serialization::PyValue::dict(std::move(state_dict_metadata))},
                                              {str("planner_data"), serialization::PyValue::dict(std::move(planner_data))},
                                              {str("storage_data"), serialization::PyValue::dict(std::move(storage_data))},
                                              {str("version"), str("1.0.0")}}));
  return serialization::pickle(metadata);
}

DcpMetadata DcpMetadata::parse(std::string_view bytes, const std::string& path) {
  try {
    const serialization::PyValue root = serialization::unpickle(bytes, path);
    if (!root.is_global(kMetadataModule, "Metadata")) {
      throw ParseError("not a torch.distributed.checkpoint Metadata (found " + root.repr() + ")");
    }
    // storage_data: {MetadataIndex: _StorageInfo}, looked up by (key, offsets) as PyTorch does.
    std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorageInfo> storage;
    const serialization::PyValue& storage_data = required_field(root, "storage_data", "Metadata");
    for (const auto& [index, info] : storage_data.dict_items()) {
      const std::string key = required_field(index, "fqn", "MetadataIndex").as_string();
      const serialization::PyValue* offset = field(index, "offset");
      std::vector<int64_t> offsets;
      if (offset && offset->kind() != serialization::PyValue::Kind::kNone) offsets = int_list(*offset, "offset of '" + key + "'");
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
      const serialization::DType dtype = properties_dtype(required_field(meta, "properties", key), key);
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
    if (const serialization::PyValue* planner = field(root, "planner_data"); planner && planner->kind() == serialization::PyValue::Kind::kDict) {
      for (const auto& [key, path] : planner->dict_items()) {
        if (key.kind() != serialization::PyValue::Kind::kString || (path.kind() != serialization::PyValue::Kind::kTuple && path.kind() != serialization::PyValue::Kind::kList)) continue;
        std::vector<std::string> parts;
        for (const auto& part : path.items()) parts.push_back(part.kind() == serialization::PyValue::Kind::kString ? part.as_string() : std::to_string(part.as_int()));
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

}  // namespace megacpp::io::checkpoint
