// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the masked form that TFRecord
// framing stores, so that TensorBoard event files can be written without TensorFlow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace megacpp::io::metrics {

// CRC-32C of `n` bytes, continuing from the CRC `crc` of the preceding bytes (0 to start).
// crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, std::size_t n, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// TFRecord's masking: rotate right by 15 bits and add a constant, so that a CRC over data that
// itself holds CRCs stays well distributed.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t masked_crc32c(std::string_view bytes) { return mask_crc32c(crc32c(bytes)); }

}  // namespace megacpp::io::metrics
