// torch.save / torch.load's zip format (PyTorch >= 1.6), torch-free: the bytes PyTorch
// writes for a tensor chunk of a Distributed Checkpoint, and reads back.
//
// An archive (io/serialization/zip_archive.h) under one directory ("archive/" when PyTorch writes
// to a stream) holding, in PyTorch 2.x's order:
//   data.pkl            pickle protocol 2 of the object; tensors are
//                       torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
//                                                       requires_grad, OrderedDict())
//                       with storage = persistent_id ('storage', torch.FloatStorage, '<key>',
//                       'cpu', <numel of the storage>): the legacy storage class names the dtype
//   .format_version     "1"  (2.x: storages numbered in first-use order)
//   .storage_alignment  "64" (2.x)
//   byteorder           "little" (2.x)
//   data/<key>          the raw little-endian bytes of each whole storage, keys "0", "1", ...
//   version             "3\n"
//   .data/serialization_id  40 decimal digits (2.x; informational)
// PyTorch 1.13 writes only data.pkl, data/<key> and version; both read all of the above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/serialization/pickle.h"

namespace megacpp::io::serialization {

enum class DType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool };

size_t dtype_size(DType dtype);
// "float32", as in torch.float32 (the name a pickled torch.dtype carries).
std::string dtype_torch_name(DType dtype);
// Inverse of dtype_torch_name; throws std::invalid_argument for other names.
DType dtype_from_torch_name(const std::string& name);
// The legacy storage class torch.save names in its persistent ids: "FloatStorage", ...
std::string dtype_storage_class(DType dtype);
// Inverse of dtype_storage_class; nullopt for other names (UntypedStorage, complex, quantized).
std::optional<DType> dtype_from_storage_class(const std::string& name);

// A strided view of a shared storage, as a torch.Tensor is: element i of dimension d is
// storage element storage_offset + sum(i_d * strides[d]).
struct RawTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;                // in elements
  int64_t storage_offset = 0;                  // in elements
  std::shared_ptr<const std::string> storage;  // raw little-endian bytes of the whole storage
  bool requires_grad = false;

  // A C-contiguous tensor owning `bytes` (numel * dtype_size bytes, else std::invalid_argument).
  static RawTensor contiguous(DType dtype, std::vector<int64_t> sizes, std::string bytes);

  int64_t numel() const;
  int64_t storage_numel() const;  // storage bytes / dtype_size
  bool is_contiguous() const;
  // The elements in C order (a copy), numel * dtype_size bytes.
  std::string contiguous_bytes() const;
  // Throws std::runtime_error starting with `what` unless sizes and strides have the same
  // rank, none is negative, and every element lies inside the storage.
  void check(const std::string& what) const;
};

// torch.save(obj) bytes, deterministic (fixed timestamps and key order). Tensors sharing a
// storage (the same `storage` pointer) share one record, as in PyTorch. Throws
// std::invalid_argument for a bad tensor, a storage shared with different dtypes, or a value
// pickle cannot write.
std::string torch_save(const PyValue& obj);

// Reads torch.save output (any archive directory name; 1.6..2.x). Tensors become kTensor
// values; tensors sharing a storage key share `storage`. Also decodes _rebuild_tensor_v3
// (dtype given explicitly, storage given as torch.UntypedStorage) and nn.Parameter
// (_rebuild_parameter). Every error (not a zip, truncated, CRC mismatch, missing record,
// unknown dtype or storage type, a view outside its storage, a legacy pre-1.6 or TorchScript
// file) throws std::runtime_error whose message starts with `what`.
PyValue torch_load(std::string_view bytes, const std::string& what);

}  // namespace megacpp::io::serialization
