#include "io/metrics/tensorboard_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "io/metrics/crc32c.h"

namespace megacpp::io::metrics {
namespace {

// --- Protocol buffer wire format, just what Event and Summary need. -----------------------
// A field is a key varint (field_number << 3 | wire_type) followed by its payload.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

template <typename UInt>
void put_little_endian(std::string& out, UInt v) {
  for (std::size_t i = 0; i < sizeof(UInt); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// int64 fields are plain varints of the two's complement value (negative: 10 bytes).
void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

// Strings, bytes and embedded messages.
void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// Field numbers of tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto.
namespace event {
constexpr uint32_t kWallTime = 1;     // double
constexpr uint32_t kStep = 2;         // int64
constexpr uint32_t kFileVersion = 3;  // string (oneof what)
constexpr uint32_t kSummary = 5;      // Summary (oneof what)
}  // namespace event
namespace summary {
constexpr uint32_t kValue = 1;  // repeated Summary.Value
}
namespace summary_value {
constexpr uint32_t kTag = 1;          // string
constexpr uint32_t kSimpleValue = 2;  // float (oneof value)
}  // namespace summary_value

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

// Like TensorBoard's _global_uid: distinct names for writers opened in the same second.
std::atomic<int> g_writer_count{0};

std::string event_file_name() {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(seconds));
  return "events.out.tfevents." + std::string(stamp) + "." + host_name() + "." +
         std::to_string(getpid()) + "." + std::to_string(g_writer_count.fetch_add(1));
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec || !std::filesystem::is_directory(log_dir)) {
    throw std::runtime_error("TensorBoardWriter: cannot create log directory '" + log_dir +
                             "'" + (ec ? ": " + ec.message() : std::string()));
  }
  path_ = (std::filesystem::path(log_dir) / event_file_name()).string();
  out_.open(path_, std::ios::binary | std::ios::out | std::ios::trunc);
  if (!out_) {
    throw std::runtime_error("TensorBoardWriter: cannot create event file '" + path_ +
                             "': " + std::strerror(errno));
  }
  std::string first;
  put_double(first, event::kWallTime, wall_time_now());
  put_bytes(first, event::kFileVersion, "brain.Event:2");
  write_record(first);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() { out_.flush(); }

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  std::string value_msg;
  put_bytes(value_msg, summary_value::kTag, tag);
  put_float(value_msg, summary_value::kSimpleValue, static_cast<float>(value));
  std::string summary_msg;
  put_bytes(summary_msg, summary::kValue, value_msg);
  std::string event_msg;
  put_double(event_msg, event::kWallTime, wall_time_now());
  put_int64(event_msg, event::kStep, step);
  put_bytes(event_msg, event::kSummary, summary_msg);
  write_record(event_msg);
}

void TensorBoardWriter::flush() {
  out_.flush();
  if (!out_) throw std::runtime_error("TensorBoardWriter: writing '" + path_ + "' failed");
}

// TFRecord framing: uint64 length, masked CRC32C of those 8 bytes, data, masked CRC32C of the
// data; all little-endian.
void TensorBoardWriter::write_record(const std::string& event) {
  std::string record;
  record.reserve(event.size() + 16);
  put_little_endian(record, static_cast<uint64_t>(event.size()));
  put_little_endian(record, masked_crc32c(record));
  record += event;
  put_little_endian(record, masked_crc32c(event));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

}  // namespace megacpp::io::metrics
