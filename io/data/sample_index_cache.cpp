#include "io/data/sample_index_cache.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "io/serialization/atomic_file.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;

const std::string kNpyMagic("\x93NUMPY\x01\x00", 8);  // format version 1.0

// FNV-1a: a stable name for a description (the description itself is compared on reading).
std::string description_hash(const std::string& description) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : description) h = (h ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::string cache_file(const SampleIndexCache& cache, const std::string& description, const std::string& what) {
  return (fs::path(cache.dir) / (description_hash(description) + "-GPTDataset-" + what)).string();
}

// A little-endian int64 .npy (format 1.0): magic, header length, a dict padded to 64 bytes.
std::string npy_bytes(const int64_t* values, const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (" + dims + "), }";
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::string bytes = kNpyMagic;
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values), static_cast<size_t>(count) * sizeof(int64_t));
  return bytes;
}

// The values of an int64 .npy written by npy_bytes, and its shape; throws naming `path`.
std::vector<int64_t> read_npy(const std::string& path, std::vector<int64_t>* shape) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, kNpyMagic.size(), kNpyMagic) != 0) throw std::runtime_error(path + ": not a .npy file");
  const size_t header_size = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < 10 + header_size) throw std::runtime_error(path + ": truncated header");
  const std::string header = bytes.substr(10, header_size);
  std::smatch match;
  if (!std::regex_search(header, match, std::regex(R"('descr': '<i8', 'fortran_order': False, 'shape': \(([0-9, ]*)\))"))) {
    throw std::runtime_error(path + ": not an int64 C-order array");
  }
  shape->clear();
  int64_t count = 1;
  std::istringstream dims(match[1].str());
  for (std::string d; std::getline(dims, d, ',');) {
    if (d.find_first_not_of(' ') == std::string::npos) continue;
    shape->push_back(std::stoll(d));
    count *= shape->back();
  }
  const size_t data_bytes = static_cast<size_t>(count) * sizeof(int64_t);
  if (bytes.size() != 10 + header_size + data_bytes) throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(10 + header_size + data_bytes));
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (count > 0) std::memcpy(values.data(), bytes.data() + 10 + header_size, data_bytes);
  return values;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<GptSampleIndices> read_cached_indices(const SampleIndexCache& cache, const std::string& description) {
  if (cache.dir.empty()) return std::nullopt;
  const std::string description_path = cache_file(cache, description, "description.txt");
  if (!fs::exists(description_path)) return std::nullopt;
  try {
    if (read_text(description_path) != description) throw std::runtime_error(description_path + " describes other indices");
    GptSampleIndices indices;
    std::vector<int64_t> shape;
    indices.document_index = read_npy(cache_file(cache, description, "document_index.npy"), &shape);
    const std::vector<int64_t> samples = read_npy(cache_file(cache, description, "sample_index.npy"), &shape);
    if (shape.size() != 2 || shape[1] != 2) throw std::runtime_error("sample_index.npy is not [samples + 1, 2]");
    for (size_t i = 0; i + 1 < samples.size(); i += 2) indices.sample_index.emplace_back(samples[i], samples[i + 1]);
    indices.shuffle_index = read_npy(cache_file(cache, description, "shuffle_index.npy"), &shape);
    if (indices.sample_index.size() != indices.shuffle_index.size() + 1) throw std::runtime_error("sample and shuffle index sizes disagree");
    return indices;
  } catch (const std::exception& e) {
    spdlog::warn("--data-cache-path: {}; building the indices again", e.what());
    return std::nullopt;
  }
}

void write_cached_indices(const SampleIndexCache& cache, const std::string& description, const GptSampleIndices& indices) {
  if (cache.dir.empty() || !cache.writer) return;
  fs::create_directories(cache.dir);
  std::vector<int64_t> samples;
  for (const auto& [position, offset] : indices.sample_index) samples.insert(samples.end(), {position, offset});
  auto write = [&](const std::string& what, const std::vector<int64_t>& values, std::vector<int64_t> shape) {
    serialization::write_file_atomically(cache_file(cache, description, what), npy_bytes(values.data(), shape));
  };
  write("document_index.npy", indices.document_index, {static_cast<int64_t>(indices.document_index.size())});
  write("sample_index.npy", samples, {static_cast<int64_t>(indices.sample_index.size()), 2});
  write("shuffle_index.npy", indices.shuffle_index, {static_cast<int64_t>(indices.shuffle_index.size())});
  serialization::write_file_atomically(cache_file(cache, description, "description.txt"), description);
}

}  // namespace megacpp::io::data
