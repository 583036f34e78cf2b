#include "io/checkpoint/index_checksums.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint/layout.h"
#include "io/serialization/atomic_file.h"

namespace megacpp::io::checkpoint {
namespace fs = std::filesystem;
namespace {

const char* const kIndexFiles[] = {".metadata", "metadata.json", "common.pt"};

uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(in.gcount()));
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

void write_index_checksums(const std::string& dir, int64_t iteration) {
  nlohmann::json crcs = nlohmann::json::object();
  for (const char* name : kIndexFiles) {
    const std::string path = (fs::path(dir) / name).string();
    if (fs::exists(path)) crcs[name] = file_crc32(path);
  }
  const nlohmann::json record = {{"iteration", iteration}, {"crc32", crcs}};
  serialization::write_file_atomically((fs::path(dir) / kIndexChecksumsFile).string(), record.dump(1) + "\n");
}

void verify_index_checksums(const std::string& dir, int64_t iteration) {
  const std::string path = (fs::path(dir) / kIndexChecksumsFile).string();
  if (!fs::exists(path)) return;
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(read_whole_file(path));
    const int64_t recorded = record.at("iteration").get<int64_t>();
    if (recorded != iteration) {
      throw std::runtime_error("it holds iteration " + std::to_string(recorded) + ", not " + std::to_string(iteration) +
                               " (was the directory or the tracker changed by hand?)");
    }
    for (const auto& [name, crc] : record.at("crc32").items()) {
      const std::string file = (fs::path(dir) / name).string();
      if (!fs::exists(file)) throw std::runtime_error(file + " is missing");
      if (file_crc32(file) != crc.get<uint32_t>()) {
        throw std::runtime_error(file + " has changed since megacpp wrote it (its CRC-32 differs): edited or damaged, "
                                        "it could load tensors into the wrong places");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not a checksum record megacpp wrote: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace megacpp::io::checkpoint
