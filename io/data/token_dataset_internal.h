// Shared by the mmap and HDF5 token datasets: dtype dispatch, widening on read, checked
// narrowing on write, and the two back ends' factories (token_dataset.cpp dispatches).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "io/data/indexed_dataset.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "megacpp token datasets assume a little-endian host (Megatron's files are little-endian)"
#endif

namespace megacpp::io::data::detail {

// Whether `code` is one of Megatron's dtype codes (1..8).
inline bool is_valid_dtype_code(uint8_t code) { return code >= 1 && code <= 8; }

// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(TokenDtype dtype, F&& f) {
  switch (dtype) {
    case TokenDtype::kUInt8: return f(uint8_t{});
    case TokenDtype::kInt8: return f(int8_t{});
    case TokenDtype::kInt16: return f(int16_t{});
    case TokenDtype::kInt32: return f(int32_t{});
    case TokenDtype::kInt64: return f(int64_t{});
    case TokenDtype::kFloat64: return f(double{});
    case TokenDtype::kFloat32: return f(float{});
    case TokenDtype::kUInt16: return f(uint16_t{});
  }
  throw std::invalid_argument("invalid token dtype code " + std::to_string(static_cast<int>(dtype)));
}

// Widens `count` tokens of sequence `sequence` stored as `dtype` at `src` (any alignment) into
// int64 `out`. Both back ends read through this, so they agree on every dtype (floats truncate).
// Throws std::out_of_range naming `file` for a float token that has no int64 value.
inline void widen_tokens(TokenDtype dtype, const void* src, int64_t count, int64_t* out, const std::string& file,
                         int64_t sequence) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto* bytes = static_cast<const unsigned char*>(src);
    for (int64_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
      if constexpr (std::is_floating_point_v<T>) {
        // Casting NaN or a value beyond int64 is undefined: a corrupt float file must not be.
        if (!(v >= -9.2e18 && v <= 9.2e18)) {
          throw std::out_of_range(file + ": sequence " + std::to_string(sequence) + ": the " + dtype_name(dtype) +
                                  " token " + std::to_string(v) + " is not a token id (NaN, infinite or beyond int64)");
        }
      }
      out[i] = static_cast<int64_t>(v);
    }
  });
}

// Appends `count` tokens to `bytes` as `dtype`. Throws std::out_of_range naming `file` for a
// token the dtype cannot hold (NumPy would wrap it silently).
inline void narrow_tokens(TokenDtype dtype, const int64_t* tokens, int64_t count,
                          std::vector<unsigned char>& bytes, const std::string& file) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const size_t start = bytes.size();
    bytes.resize(start + static_cast<size_t>(count) * sizeof(T));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t t = tokens[i];
      if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int64_t)) {
        if (t < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            t > static_cast<int64_t>(std::numeric_limits<T>::max())) {
          bytes.resize(start);
          throw std::out_of_range(file + ": token " + std::to_string(t) + " does not fit dtype " +
                                  dtype_name(dtype) + " (choose a wider dtype for this vocabulary)");
        }
      }
      const T v = static_cast<T>(t);
      std::memcpy(bytes.data() + start + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
    }
  });
}

// Checks document_indices as the header comment of indexed_dataset.h describes; throws
// std::runtime_error naming `file`.
void validate_document_indices(const std::vector<int64_t>& document_indices, int64_t num_sequences,
                               const std::string& file);

// Checks a read request against a sequence; throws std::out_of_range naming `file`.
void check_read_range(int64_t sequence, int64_t num_sequences, int64_t offset, int64_t count,
                      int64_t length, const std::string& file);

std::unique_ptr<TokenDataset> open_mmap_dataset(const std::string& prefix);
std::unique_ptr<TokenDatasetWriter> create_mmap_writer(const std::string& prefix, TokenDtype dtype);
std::unique_ptr<TokenDataset> open_hdf5_dataset(const std::string& file);
std::unique_ptr<TokenDatasetWriter> create_hdf5_writer(const std::string& file, TokenDtype dtype);

}  // namespace megacpp::io::data::detail
