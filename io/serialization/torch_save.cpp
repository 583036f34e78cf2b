// torch_save / torch_load (see torch_save.h), following torch/serialization.py's _save and
// _load and caffe2/serialize/inline_container.cc's record layout.
#include "io/serialization/torch_save.h"

#include <cstdio>
#include <map>
#include <stdexcept>

#include "io/serialization/zip_archive.h"

namespace megacpp::io::serialization {
namespace {

constexpr const char* kArchive = "archive";

PyValue int_tuple(const std::vector<int64_t>& values) {
  std::vector<PyValue> items;
  for (int64_t v : values) items.push_back(PyValue::integer(v));
  return PyValue::tuple(std::move(items));
}

// .data/serialization_id: PyTorch writes 20 digits of a hash of the record names and 20 of
// a hash of their CRCs; readers only log it. Ours is the same shape, from FNV-1a.
std::string serialization_id(const std::vector<ZipRecord>& records) {
  uint64_t names = 1469598103934665603ull, crcs = 1469598103934665603ull;
  for (const auto& r : records) {
    for (unsigned char c : r.name) names = (names ^ c) * 1099511628211ull;
    crcs = (crcs ^ crc32_of(r.data)) * 1099511628211ull;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%020llu%020llu", static_cast<unsigned long long>(names),
                static_cast<unsigned long long>(crcs));
  return buf;
}

// The storages a torch_save pickles, numbered in first-use order as PyTorch's id_map does.
class StorageTable {
 public:
  // The persistent id of `t`'s storage.
  PyValue pid(const RawTensor& t) {
    auto it = t.storage ? keys_.find(t.storage.get()) : keys_.end();
    size_t index;
    if (it != keys_.end()) {
      index = it->second;
      if (records_[index].dtype != t.dtype) {
        throw std::invalid_argument("torch_save: one storage is viewed as both " +
                                    dtype_torch_name(records_[index].dtype) + " and " + dtype_torch_name(t.dtype) +
                                    " (PyTorch cannot save that either)");
      }
    } else {
      if (t.storage && t.storage->size() % dtype_size(t.dtype) != 0) {
        throw std::invalid_argument("torch_save: a storage of " + std::to_string(t.storage->size()) +
                                    " bytes is not a whole number of " + dtype_torch_name(t.dtype));
      }
      index = records_.size();
      records_.push_back({std::to_string(index), t.dtype, t.storage});
      if (t.storage) keys_.emplace(t.storage.get(), index);
    }
    return make_pid(records_[index]);
  }

  // data/<key> records, in key order.
  void add_records(std::vector<ZipRecord>& out) const {
    for (const Record& r : records_) {
      out.push_back(
          {std::string(kArchive) + "/data/" + r.key, r.bytes ? std::string_view(*r.bytes) : std::string_view()});
    }
  }

 private:
  struct Record {
    std::string key;
    DType dtype;
    std::shared_ptr<const std::string> bytes;
  };
  static PyValue make_pid(const Record& r) {
    const int64_t numel = r.bytes ? static_cast<int64_t>(r.bytes->size() / dtype_size(r.dtype)) : 0;
    return PyValue::tuple({PyValue::string("storage"), PyValue::global("torch", dtype_storage_class(r.dtype)),
                           PyValue::string(r.key), PyValue::string("cpu"), PyValue::integer(numel)});
  }
  std::map<const std::string*, size_t> keys_;
  std::vector<Record> records_;
};

}  // namespace

std::string torch_save(const PyValue& obj) {
  StorageTable storages;
  // A storage is a 1-D tensor over the whole storage; only those built here get a pid.
  std::map<const RawTensor*, std::shared_ptr<const RawTensor>> storage_values;
  PickleHooks hooks;
  hooks.persistent_id = [&](const PyValue& v) -> std::optional<PyValue> {
    if (v.kind() != PyValue::Kind::kTensor || !storage_values.count(&v.tensor())) return std::nullopt;
    return storages.pid(v.tensor());
  };
  hooks.reduce_tensor = [&](const PyValue& v) {
    const RawTensor& t = v.tensor();
    try {
      t.check("torch_save");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
    auto storage = std::make_shared<RawTensor>();
    storage->dtype = t.dtype;
    storage->storage = t.storage;
    storage_values.emplace(storage.get(), storage);
    return PyValue::object(
        PyValue::global("torch._utils", "_rebuild_tensor_v2"),
        PyValue::tuple({PyValue::tensor(storage), PyValue::integer(t.storage_offset), int_tuple(t.sizes),
                        int_tuple(t.strides), PyValue::boolean(t.requires_grad),
                        PyValue::object(PyValue::global("collections", "OrderedDict"), PyValue::tuple({}))}));
  };
  const std::string data_pkl = pickle(obj, hooks);

  const std::string dir = kArchive;
  std::vector<ZipRecord> records = {{dir + "/data.pkl", data_pkl},
                                    {dir + "/.format_version", "1"},
                                    {dir + "/.storage_alignment", "64"},
                                    {dir + "/byteorder", "little"}};
  storages.add_records(records);
  records.push_back({dir + "/version", "3\n"});
  const std::string id = serialization_id(records);
  records.push_back({dir + "/.data/serialization_id", id});
  return write_zip(records);
}

namespace {

// Reading: persistent_load and the _rebuild_* calls, with every error naming `what`.
class Loader {
 public:
  Loader(std::string_view bytes, const std::string& what) : what_(what), zip_(bytes, what) {
    const std::string first = zip_.names().empty() ? std::string() : zip_.names().front();
    const size_t slash = first.find('/');
    if (slash == std::string::npos) fail("not a torch.save archive (record '" + first + "' is not in a directory)");
    prefix_ = first.substr(0, slash + 1);
    if (!zip_.contains(prefix_ + "data.pkl")) {
      if (zip_.contains(prefix_ + "constants.pkl")) fail("a TorchScript archive (torch.jit.save), not torch.save");
      fail("not a torch.save archive (no " + prefix_ + "data.pkl)");
    }
    if (zip_.contains(prefix_ + "byteorder") && zip_.read(prefix_ + "byteorder") != "little") {
      fail("big-endian torch.save files are not supported");
    }
  }

  PyValue load() {
    UnpickleHooks hooks;
    hooks.persistent_load = [this](const PyValue& pid) { return storage(pid); };
    hooks.resolve_reduce = [this](const PyValue& callable, const PyValue& args) { return rebuild(callable, args); };
    return unpickle(zip_.read(prefix_ + "data.pkl"), what_ + " (" + prefix_ + "data.pkl)", hooks);
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw std::runtime_error(what_ + ": " + problem); }

  // ('storage', storage_type, key, location, numel): a 1-D tensor over the whole storage.
  PyValue storage(const PyValue& pid) {
    if (pid.kind() != PyValue::Kind::kTuple || pid.items().size() < 5 ||
        pid.items()[0].kind() != PyValue::Kind::kString || pid.items()[0].as_string() != "storage") {
      fail("unexpected persistent id " + pid.repr());
    }
    const auto& f = pid.items();
    const PyValue& type = f[1];
    DType dtype = DType::kUInt8;  // torch.UntypedStorage: bytes; the tensor's dtype comes from _rebuild_tensor_v3
    if (!type.is_global("torch", "UntypedStorage")) {
      std::optional<DType> typed;
      if (type.kind() == PyValue::Kind::kGlobal && type.module() == "torch")
        typed = dtype_from_storage_class(type.name());
      if (!typed) fail("unsupported storage type " + type.repr());
      dtype = *typed;
    }
    if (f[2].kind() != PyValue::Kind::kString || f[4].kind() != PyValue::Kind::kInt)
      fail("bad persistent id " + pid.repr());
    const std::string& key = f[2].as_string();
    const int64_t numel = f[4].as_int();
    auto it = bytes_.find(key);
    if (it == bytes_.end()) {
      const std::string name = prefix_ + "data/" + key;
      if (!zip_.contains(name)) fail("missing record '" + name + "'");
      auto bytes = std::make_shared<const std::string>(zip_.read(name));
      it = bytes_.emplace(key, bytes).first;
    }
    const auto& bytes = it->second;
    if (numel < 0 || static_cast<uint64_t>(numel) * dtype_size(dtype) != bytes->size()) {
      fail("record '" + prefix_ + "data/" + key + "' holds " + std::to_string(bytes->size()) +
           " bytes, but the pickle says " + std::to_string(numel) + " elements of " + dtype_torch_name(dtype));
    }
    auto t = std::make_shared<RawTensor>();
    t->dtype = dtype;
    t->sizes = {numel};
    t->strides = {1};
    t->storage = bytes;
    return PyValue::tensor(std::move(t));
  }

  std::vector<int64_t> ints(const PyValue& v, const char* field) const {
    if (v.kind() != PyValue::Kind::kTuple && v.kind() != PyValue::Kind::kList) {
      fail(std::string("tensor ") + field + " is " + v.repr() + ", not a tuple");
    }
    std::vector<int64_t> out;
    for (const auto& item : v.items()) {
      if (item.kind() != PyValue::Kind::kInt)
        fail(std::string("tensor ") + field + " " + v.repr() + " is not all ints");
      out.push_back(item.as_int());
    }
    return out;
  }

  std::optional<PyValue> rebuild(const PyValue& callable, const PyValue& args) {
    if (callable.kind() != PyValue::Kind::kGlobal || callable.module() != "torch._utils") return std::nullopt;
    const std::string& fn = callable.name();
    const auto& a = args.items();
    if (fn == "_rebuild_tensor_v2" || fn == "_rebuild_tensor_v3" || fn == "_rebuild_tensor") {
      const size_t needed = fn == "_rebuild_tensor_v3" ? 7 : fn == "_rebuild_tensor" ? 4 : 6;
      if (a.size() < needed || a[0].kind() != PyValue::Kind::kTensor || a[1].kind() != PyValue::Kind::kInt) {
        fail("bad arguments to torch._utils." + fn + ": " + args.repr());
      }
      const RawTensor& storage = a[0].tensor();
      auto t = std::make_shared<RawTensor>();
      t->dtype = storage.dtype;
      if (fn == "_rebuild_tensor_v3") {
        if (a[6].kind() != PyValue::Kind::kGlobal || a[6].module() != "torch") fail("bad dtype " + a[6].repr());
        try {
          t->dtype = dtype_from_torch_name(a[6].name());
        } catch (const std::invalid_argument& e) {
          fail(e.what());
        }
        if (storage.storage->size() % dtype_size(t->dtype) != 0) fail("storage size is not a whole number of elements");
      }
      t->storage = storage.storage;
      t->storage_offset = a[1].as_int();
      t->sizes = ints(a[2], "size");
      t->strides = ints(a[3], "stride");
      if (a.size() > 4 && a[4].kind() == PyValue::Kind::kBool) t->requires_grad = a[4].as_bool();
      t->check(what_);
      return PyValue::tensor(std::move(t));
    }
    if (fn == "_rebuild_parameter" || fn == "_rebuild_parameter_with_state") {
      if (a.size() < 2 || a[0].kind() != PyValue::Kind::kTensor || a[1].kind() != PyValue::Kind::kBool) {
        fail("bad arguments to torch._utils." + fn + ": " + args.repr());
      }
      auto t = std::make_shared<RawTensor>(a[0].tensor());
      t->requires_grad = a[1].as_bool();
      return PyValue::tensor(std::move(t));
    }
    return std::nullopt;
  }

  const std::string& what_;
  ZipReader zip_;
  std::string prefix_;                                               // "archive/"
  std::map<std::string, std::shared_ptr<const std::string>> bytes_;  // storage key -> bytes
};

}  // namespace

PyValue torch_load(std::string_view bytes, const std::string& what) {
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && static_cast<unsigned char>(bytes[1]) <= 5) {
    throw std::runtime_error(what + ": a legacy (PyTorch < 1.6, non-zip) torch.save file, which is not supported");
  }
  return Loader(bytes, what).load();
}

}  // namespace megacpp::io::serialization
