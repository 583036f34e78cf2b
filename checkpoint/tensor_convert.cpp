#include "checkpoint/tensor_convert.h"

#include <cstring>
#include <stdexcept>

#include <ATen/ATen.h>

namespace megacpp::checkpoint {

io::serialization::DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return io::serialization::DType::kFloat32;
    case at::kDouble: return io::serialization::DType::kFloat64;
    case at::kHalf: return io::serialization::DType::kFloat16;
    case at::kBFloat16: return io::serialization::DType::kBFloat16;
    case at::kLong: return io::serialization::DType::kInt64;
    case at::kInt: return io::serialization::DType::kInt32;
    case at::kShort: return io::serialization::DType::kInt16;
    case at::kChar: return io::serialization::DType::kInt8;
    case at::kByte: return io::serialization::DType::kUInt8;
    case at::kBool: return io::serialization::DType::kBool;
    default: throw std::invalid_argument(std::string("cannot store tensors of type ") + c10::toString(type));
  }
}

at::ScalarType to_scalar_type(io::serialization::DType dtype) {
  switch (dtype) {
    case io::serialization::DType::kFloat32: return at::kFloat;
    case io::serialization::DType::kFloat64: return at::kDouble;
    case io::serialization::DType::kFloat16: return at::kHalf;
    case io::serialization::DType::kBFloat16: return at::kBFloat16;
    case io::serialization::DType::kInt64: return at::kLong;
    case io::serialization::DType::kInt32: return at::kInt;
    case io::serialization::DType::kInt16: return at::kShort;
    case io::serialization::DType::kInt8: return at::kChar;
    case io::serialization::DType::kUInt8: return at::kByte;
    case io::serialization::DType::kBool: return at::kBool;
  }
  throw std::invalid_argument("unknown dtype");
}

io::serialization::RawTensor to_raw(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  std::string bytes(static_cast<size_t>(cpu.numel()) * cpu.element_size(), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), cpu.data_ptr(), bytes.size());
  return io::serialization::RawTensor::contiguous(to_dtype(cpu.scalar_type()), cpu.sizes().vec(), std::move(bytes));
}

at::Tensor from_raw(const io::serialization::RawTensor& raw) {
  const at::ScalarType type = to_scalar_type(raw.dtype);
  const size_t element = io::serialization::dtype_size(raw.dtype);
  const int64_t storage_numel = raw.storage ? static_cast<int64_t>(raw.storage->size() / element) : 0;
  if (storage_numel == 0) return at::empty(raw.sizes, at::TensorOptions().dtype(type));
  // A read-only view of the stored bytes, copied once by clone().
  const at::Tensor stored = at::from_blob(const_cast<char*>(raw.storage->data()), {storage_numel}, at::TensorOptions().dtype(type));
  return stored.as_strided(raw.sizes, raw.strides, raw.storage_offset).clone();
}

std::string to_safetensors_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kBFloat16: return "BF16";
    case at::kHalf: return "F16";
    default: throw std::invalid_argument(std::string("no safetensors dtype for ") + c10::toString(type));
  }
}

at::ScalarType from_safetensors_dtype(const std::string& dtype, const std::string& what) {
  if (dtype == "F32") return at::kFloat;
  if (dtype == "BF16") return at::kBFloat16;
  if (dtype == "F16") return at::kHalf;
  throw std::runtime_error(what + ": dtype " + dtype + " is not a floating-point weight type megacpp imports (F32, BF16, F16)");
}

io::serialization::TensorView safetensors_view(const at::Tensor& t) {
  if (!t.is_contiguous() || !t.device().is_cpu()) throw std::invalid_argument("safetensors_view: expected a contiguous CPU tensor");
  return {to_safetensors_dtype(t.scalar_type()), t.sizes().vec(), static_cast<const uint8_t*>(t.data_ptr()),
          static_cast<size_t>(t.nbytes())};
}

}  // namespace megacpp::checkpoint
