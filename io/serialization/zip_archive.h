// The zip container of torch.save (PyTorch's caffe2/serialize/inline_container.cc, miniz):
// uncompressed records under one top directory ("archive/data.pkl", "archive/data/0", ...),
// each record's data aligned to 64 bytes by padding the local header's extra field with an
// "FB" field of 'Z's, a zip64 end-of-central-directory record always present, zero DOS
// timestamps. We write the same layout (CRC and sizes in the local header rather than in a
// data descriptor; zip64 fields only for records that need them) and read any zip with
// stored or deflated records.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace megacpp::io::serialization {

struct ZipRecord {
  std::string name;       // full name inside the archive, e.g. "archive/data/0"
  std::string_view data;  // must outlive write_zip
};

// The archive's bytes: records in the given order, stored, each data start a multiple of
// `alignment`. `force_zip64` gives every record zip64 sizes and offsets (for tests: real
// archives get them only past 4 GiB). Throws std::invalid_argument for duplicate names.
std::string write_zip(const std::vector<ZipRecord>& records, uint64_t alignment = 64, bool force_zip64 = false);

// CRC-32 of `data` (zlib's).
uint32_t crc32_of(std::string_view data);

// A parsed zip held as a view of its bytes (which must outlive it). Every error throws
// std::runtime_error starting with `what`.
class ZipReader {
 public:
  ZipReader(std::string_view bytes, std::string what);

  // Names in central-directory order.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The record's bytes, checked against the directory's size and CRC-32 (a CRC of 0 on a
  // non-empty record means "not computed", as torch.serialization.set_crc32_options(False)
  // writes, and is not checked). Throws for a missing record.
  std::string read(const std::string& name) const;
  // Where the record's (stored) data starts in the archive.
  uint64_t data_offset(const std::string& name) const;

 private:
  struct Entry {
    uint16_t method = 0;
    uint32_t crc = 0;
    uint64_t compressed = 0;
    uint64_t size = 0;
    uint64_t data_offset = 0;
  };
  const Entry& entry(const std::string& name) const;
  [[noreturn]] void fail(const std::string& problem) const;

  std::string_view bytes_;
  std::string what_;
  std::vector<std::string> names_;
  std::map<std::string, Entry> entries_;
};

}  // namespace megacpp::io::serialization
