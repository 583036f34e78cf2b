// What the fused CPU kernels share: an exp that the compiler vectorizes, a loop over rows in
// parallel, and the conversion of a row to fp32 and back. Note [Fused kernels] in fusion.h.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

// Each loop over a row is compiled for AVX-512, AVX2 and the baseline, and the loader picks
// the one the CPU runs (GCC's function multiversioning on x86-64; elsewhere the baseline only).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
#define MEGACPP_ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MEGACPP_ROW_LOOP
#endif

namespace megacpp::models::kernels {

// e^x in fp32 to about 1 ulp (Cephes' expf: x = n ln 2 + r, |r| <= ln 2 / 2, a degree-5
// polynomial in r, 2^n from the exponent bits), in plain arithmetic so that a loop of it
// vectorizes (with -fno-trapping-math, which lets the compiler compute both sides of a select);
// libm's expf is a call per element. NaN stays NaN (the NaN guard reads the loss).
inline float exp_approx(float x) {
  const float above = x < -87.0f ? -87.0f : x;
  const float clamped = above > 88.0f ? 88.0f : above;
  const float shifted = clamped * 1.44269504088896341f + 12582912.0f;  // 1.5 * 2^23: rounds to an integer
  const float n = shifted - 12582912.0f;
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t shifted_bits, scale_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  scale_bits = (shifted_bits - 0x4B400000 + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float result = x < -87.0f ? 0.0f : p * scale;
  return x == x ? result : x;
}

// The sum of term(i) over [0, n) in 8 interleaved partial sums: a single fp32 accumulator is a
// serial chain the compiler may not reorder, 8 lanes are a vector add.
template <typename F>
inline float lane_sum(int64_t n, const F& term) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += term(i + k);
  }
  float total = 0;
  for (; i < n; ++i) total += term(i);
  for (float lane : lanes) total += lane;
  return total;
}

// The largest of x[0, n) (n >= 1), in 8 lanes as lane_sum. A NaN may be skipped here: the exp of
// it minus the maximum, which callers take next, is NaN again.
inline float lane_max(const float* x, int64_t n) {
  float lanes[8] = {x[0], x[0], x[0], x[0], x[0], x[0], x[0], x[0]};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  }
  float top = lanes[0];
  for (; i < n; ++i) top = x[i] > top ? x[i] : top;
  for (float lane : lanes) top = lane > top ? lane : top;
  return top;
}

inline float to_float(float x) { return x; }
inline float to_float(c10::BFloat16 x) { return static_cast<float>(x); }
inline float to_float(c10::Half x) { return static_cast<float>(x); }

// A row of T as fp32: the row itself when T is float, else a copy in `buffer`.
template <typename T>
const float* row_as_float(const T* row, int64_t n, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    buffer.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buffer[static_cast<size_t>(i)] = to_float(row[i]);
    return buffer.data();
  }
}

// fp32 values written to a row of T (rounded to nearest for bf16 and half).
template <typename T>
void store_row(const float* values, int64_t n, T* row) {
  if constexpr (std::is_same_v<T, float>) {
    if (values != row) std::memcpy(row, values, static_cast<size_t>(n) * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<T>(values[i]);
  }
}

// f(T{}) for the type of a fusable tensor (fusion.h): float, bf16 or half.
template <typename F>
void with_element_type(c10::ScalarType type, const F& f) {
  switch (type) {
    case c10::kFloat: f(float{}); break;
    case c10::kBFloat16: f(c10::BFloat16{}); break;
    case c10::kHalf: f(c10::Half{}); break;
    default: TORCH_CHECK(false, "fused kernels take float, bf16 or half tensors, got ", type);
  }
}

// Rows [0, rows) in parallel on libtorch's intra-op threads, in ranges worth a thread.
template <typename F>
void for_each_row_range(int64_t rows, int64_t row_length, const F& body) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, row_length));
  at::parallel_for(0, rows, grain, body);
}

}  // namespace megacpp::models::kernels
