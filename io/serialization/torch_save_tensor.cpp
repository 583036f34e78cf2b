// DType names and RawTensor (io/serialization/torch_save.h).
#include <cstring>
#include <stdexcept>

#include "io/serialization/torch_save.h"

namespace megacpp::io::serialization {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  const char* torch_name;
  const char* storage_class;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kFloat32, 4, "float32", "FloatStorage"}, {DType::kFloat64, 8, "float64", "DoubleStorage"},
    {DType::kFloat16, 2, "float16", "HalfStorage"},  {DType::kBFloat16, 2, "bfloat16", "BFloat16Storage"},
    {DType::kInt64, 8, "int64", "LongStorage"},      {DType::kInt32, 4, "int32", "IntStorage"},
    {DType::kInt16, 2, "int16", "ShortStorage"},     {DType::kInt8, 1, "int8", "CharStorage"},
    {DType::kUInt8, 1, "uint8", "ByteStorage"},      {DType::kBool, 1, "bool", "BoolStorage"},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& i : kDTypes) {
    if (i.dtype == dtype) return i;
  }
  throw std::invalid_argument("unknown DType " + std::to_string(static_cast<int>(dtype)));
}

// a * b, or nullopt on int64 overflow.
std::optional<int64_t> mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string dtype_torch_name(DType dtype) { return info(dtype).torch_name; }
std::string dtype_storage_class(DType dtype) { return info(dtype).storage_class; }

DType dtype_from_torch_name(const std::string& name) {
  for (const auto& i : kDTypes) {
    if (name == i.torch_name) return i.dtype;
  }
  throw std::invalid_argument("unsupported torch dtype '" + name + "' (megacpp reads " +
                              "float32/64, float16, bfloat16, int8/16/32/64, uint8 and bool)");
}

std::optional<DType> dtype_from_storage_class(const std::string& name) {
  for (const auto& i : kDTypes) {
    if (name == i.storage_class) return i.dtype;
  }
  return std::nullopt;
}

RawTensor RawTensor::contiguous(DType dtype, std::vector<int64_t> sizes, std::string bytes) {
  RawTensor t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.strides.assign(t.sizes.size(), 1);
  for (size_t d = t.sizes.size(); d-- > 1;) t.strides[d - 1] = t.strides[d] * std::max<int64_t>(t.sizes[d], 1);
  const int64_t n = t.numel();
  if (n < 0 || static_cast<uint64_t>(n) * dtype_size(dtype) != bytes.size()) {
    throw std::invalid_argument("RawTensor::contiguous: " + std::to_string(bytes.size()) + " bytes for " +
                                std::to_string(n) + " elements of " + dtype_torch_name(dtype));
  }
  t.storage = std::make_shared<const std::string>(std::move(bytes));
  return t;
}

int64_t RawTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) return -1;
    const auto r = mul(n, s);
    if (!r) return -1;
    n = *r;
  }
  return n;
}

int64_t RawTensor::storage_numel() const {
  return storage ? static_cast<int64_t>(storage->size() / dtype_size(dtype)) : 0;
}

bool RawTensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;  // any stride is fine for a dimension of one
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

void RawTensor::check(const std::string& what) const {
  auto fail = [&](const std::string& problem) { throw std::runtime_error(what + ": " + problem); };
  if (sizes.size() != strides.size())
    fail("tensor has " + std::to_string(sizes.size()) + " sizes but " + std::to_string(strides.size()) + " strides");
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) fail("tensor has a negative size or stride");
  }
  if (storage_offset < 0) fail("tensor has a negative storage offset");
  const int64_t n = numel();
  if (n < 0) fail("tensor has too many elements");
  if (n == 0) return;
  int64_t last = storage_offset;  // index of the last element
  for (size_t d = 0; d < sizes.size(); ++d) {
    const auto step = mul(sizes[d] - 1, strides[d]);
    if (!step || __builtin_add_overflow(last, *step, &last)) fail("tensor view overflows");
  }
  if (last >= storage_numel()) {
    fail("tensor view (offset " + std::to_string(storage_offset) + ", reaching element " + std::to_string(last) +
         ") lies outside its storage of " + std::to_string(storage_numel()) + " elements");
  }
}

std::string RawTensor::contiguous_bytes() const {
  const size_t es = dtype_size(dtype);
  const int64_t n = numel();
  if (n <= 0) return {};
  const char* base = storage->data();
  if (is_contiguous()) return std::string(base + storage_offset * es, static_cast<size_t>(n) * es);
  std::string out(static_cast<size_t>(n) * es, '\0');
  char* dst = out.data();
  // Walk the outer dimensions with a counter; copy the innermost dimension as one run.
  const size_t rank = sizes.size();
  const int64_t inner = sizes[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t src = storage_offset;
  for (int64_t done = 0; done < n; done += inner) {
    if (inner_stride == 1) {
      std::memcpy(dst, base + src * es, static_cast<size_t>(inner) * es);
      dst += inner * es;
    } else {
      for (int64_t i = 0; i < inner; ++i, dst += es) std::memcpy(dst, base + (src + i * inner_stride) * es, es);
    }
    for (size_t d = rank - 1; d-- > 0;) {
      src += strides[d];
      if (++index[d] < sizes[d]) break;
      src -= strides[d] * sizes[d];
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace megacpp::io::serialization
