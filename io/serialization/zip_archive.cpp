// Zip writing and reading for torch.save archives (see zip_archive.h). Layout per PKWARE's
// APPNOTE: local header (30 bytes) + name + extra + data per record, then the central
// directory (46 bytes + name + extra per record), the zip64 end record (56 bytes) and
// locator (20 bytes), and the classic end record (22 bytes).
#include "io/serialization/zip_archive.h"

#include <zlib.h>

#include <cstdio>
#include <set>
#include <stdexcept>

namespace megacpp::io::serialization {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr uint64_t kMax32 = 0xFFFFFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB", PyTorch's padding field

void put(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint64_t get(std::string_view bytes, uint64_t pos, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[pos + i]);
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

uint32_t crc32_of(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large records in pieces.
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min<size_t>(data.size() - done, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

std::string write_zip(const std::vector<ZipRecord>& records, uint64_t alignment, bool force_zip64) {
  if (alignment == 0) throw std::invalid_argument("write_zip: alignment must be positive");
  std::set<std::string> seen;
  std::string out, central;
  for (const ZipRecord& r : records) {
    if (!seen.insert(r.name).second) throw std::invalid_argument("write_zip: duplicate record " + r.name);
    const uint64_t offset = out.size(), size = r.data.size();
    const uint32_t crc = crc32_of(r.data);
    const bool big_size = force_zip64 || size >= kMax32;
    const bool big_offset = force_zip64 || offset >= kMax32;
    const uint16_t version = (big_size || big_offset) ? 45 : 20;
    const uint16_t flags = 0x0800;  // names are UTF-8

    // Local extra: zip64 sizes when needed, then padding so the data starts aligned.
    std::string extra;
    if (big_size) {
      put(extra, kZip64ExtraId, 2);
      put(extra, 16, 2);
      put(extra, size, 8);
      put(extra, size, 8);
    }
    const uint64_t unpadded = offset + 30 + r.name.size() + extra.size() + 4;
    const uint64_t padding = (alignment - unpadded % alignment) % alignment;
    put(extra, kPaddingExtraId, 2);
    put(extra, padding, 2);
    extra.append(padding, 'Z');

    put(out, kLocalSig, 4);
    put(out, version, 2);
    put(out, flags, 2);
    put(out, 0, 2);  // stored
    put(out, 0, 4);  // DOS time and date: zero, as PyTorch writes
    put(out, crc, 4);
    put(out, big_size ? kMax32 : size, 4);
    put(out, big_size ? kMax32 : size, 4);
    put(out, r.name.size(), 2);
    put(out, extra.size(), 2);
    out += r.name;
    out += extra;
    out.append(r.data.data(), r.data.size());

    std::string central_extra;
    if (big_size || big_offset) {
      put(central_extra, kZip64ExtraId, 2);
      put(central_extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0), 2);
      if (big_size) {
        put(central_extra, size, 8);
        put(central_extra, size, 8);
      }
      if (big_offset) put(central_extra, offset, 8);
    }
    put(central, kCentralSig, 4);
    put(central, version, 2);  // made by (MS-DOS host)
    put(central, version, 2);  // needed
    put(central, flags, 2);
    put(central, 0, 2);
    put(central, 0, 4);
    put(central, crc, 4);
    put(central, big_size ? kMax32 : size, 4);
    put(central, big_size ? kMax32 : size, 4);
    put(central, r.name.size(), 2);
    put(central, central_extra.size(), 2);
    put(central, 0, 2);  // comment
    put(central, 0, 2);  // disk
    put(central, 0, 2);  // internal attributes
    put(central, 0, 4);  // external attributes
    put(central, big_offset ? kMax32 : offset, 4);
    central += r.name;
    central += central_extra;
  }
  const uint64_t cd_offset = out.size(), cd_size = central.size(), count = records.size();
  out += central;
  const uint64_t end64_offset = out.size();
  put(out, kEnd64Sig, 4);
  put(out, 44, 8);  // size of the rest of this record
  put(out, 45, 2);
  put(out, 45, 2);
  put(out, 0, 4);
  put(out, 0, 4);
  put(out, count, 8);
  put(out, count, 8);
  put(out, cd_size, 8);
  put(out, cd_offset, 8);
  put(out, kLocator64Sig, 4);
  put(out, 0, 4);
  put(out, end64_offset, 8);
  put(out, 1, 4);  // total disks
  put(out, kEndSig, 4);
  put(out, 0, 4);  // disk numbers
  put(out, count >= 0xFFFF || force_zip64 ? 0xFFFF : count, 2);
  put(out, count >= 0xFFFF || force_zip64 ? 0xFFFF : count, 2);
  put(out, cd_size >= kMax32 || force_zip64 ? kMax32 : cd_size, 4);
  put(out, cd_offset >= kMax32 || force_zip64 ? kMax32 : cd_offset, 4);
  put(out, 0, 2);  // comment
  return out;
}

void ZipReader::fail(const std::string& problem) const { throw std::runtime_error(what_ + ": " + problem); }

ZipReader::ZipReader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {
  const uint64_t n = bytes.size();
  if (n < 4 || get(bytes, 0, 4) != kLocalSig) fail("not a zip archive (torch.save files start with \"PK\\x03\\x04\")");
  // The end record: the last signature whose comment reaches exactly the end of the file.
  int64_t end = -1;
  for (int64_t p = static_cast<int64_t>(n) - 22; p >= 0 && p >= static_cast<int64_t>(n) - 22 - 65535; --p) {
    if (get(bytes, p, 4) == kEndSig && p + 22 + get(bytes, p + 20, 2) == n) {
      end = p;
      break;
    }
  }
  if (end < 0) fail("truncated or not a zip archive (no end-of-central-directory record)");
  if (get(bytes, end + 4, 4) != 0) fail("multi-disk zip archives are not supported");
  uint64_t count = get(bytes, end + 10, 2), cd_size = get(bytes, end + 12, 4), cd_offset = get(bytes, end + 16, 4);
  if (end >= 20 && get(bytes, end - 20, 4) == kLocator64Sig) {
    const uint64_t end64 = get(bytes, end - 20 + 8, 8);
    if (end64 > n - 56 || get(bytes, end64, 4) != kEnd64Sig) fail("bad zip64 end-of-central-directory record");
    count = get(bytes, end64 + 32, 8);
    cd_size = get(bytes, end64 + 40, 8);
    cd_offset = get(bytes, end64 + 48, 8);
  } else if (count == 0xFFFF || cd_size == kMax32 || cd_offset == kMax32) {
    fail("zip64 archive without its zip64 end record");
  }
  if (cd_offset > n || cd_size > n - cd_offset) fail("truncated zip archive (central directory out of the file)");

  uint64_t p = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (p + 46 > cd_end || get(bytes, p, 4) != kCentralSig) fail("corrupt zip central directory");
    Entry e;
    const uint16_t flags = static_cast<uint16_t>(get(bytes, p + 8, 2));
    e.method = static_cast<uint16_t>(get(bytes, p + 10, 2));
    e.crc = static_cast<uint32_t>(get(bytes, p + 16, 4));
    e.compressed = get(bytes, p + 20, 4);
    e.size = get(bytes, p + 24, 4);
    const uint64_t name_len = get(bytes, p + 28, 2), extra_len = get(bytes, p + 30, 2),
                   comment_len = get(bytes, p + 32, 2);
    uint64_t local = get(bytes, p + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd_end) fail("corrupt zip central directory");
    std::string name(bytes.substr(p + 46, name_len));
    // Zip64 extra field: 8-byte values for the fields saturated above, in this order.
    for (uint64_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = get(bytes, x, 2), len = get(bytes, x + 2, 2);
      if (x + 4 + len > p + 46 + name_len + extra_len) fail("corrupt zip extra field of " + name);
      if (id == kZip64ExtraId) {
        uint64_t q = x + 4;
        auto take = [&](uint64_t& field) {
          if (field != kMax32) return;
          if (q + 8 > x + 4 + len) fail("corrupt zip64 field of " + name);
          field = get(bytes, q, 8);
          q += 8;
        };
        take(e.size);
        take(e.compressed);
        take(local);
      }
      x += 4 + len;
    }
    if (flags & 1) fail("record " + name + " is encrypted");
    if (e.method != 0 && e.method != 8) fail("record " + name + " uses compression method " + std::to_string(e.method));
    if (local > n - 30 || get(bytes, local, 4) != kLocalSig)
      fail("truncated zip archive (no local header for " + name + ")");
    const uint64_t local_name = get(bytes, local + 26, 2), local_extra = get(bytes, local + 28, 2);
    if (local + 30 + local_name > n || bytes.substr(local + 30, local_name) != name) {
      fail("local header of " + name + " does not match the central directory");
    }
    e.data_offset = local + 30 + local_name + local_extra;
    if (e.data_offset > n || e.compressed > n - e.data_offset) fail("truncated zip archive (record " + name + ")");
    if (!entries_.emplace(name, e).second) fail("duplicate record " + name);
    names_.push_back(std::move(name));
    p += 46 + name_len + extra_len + comment_len;
  }
}

const ZipReader::Entry& ZipReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("missing record '" + name + "'");
  return it->second;
}

uint64_t ZipReader::data_offset(const std::string& name) const { return entry(name).data_offset; }

std::string ZipReader::read(const std::string& name) const {
  const Entry& e = entry(name);
  std::string data;
  if (e.method == 0) {
    if (e.compressed != e.size) fail("record '" + name + "' is stored but its sizes differ");
    data.assign(bytes_.substr(e.data_offset, e.size));
  } else {
    data.resize(e.size);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("zlib inflateInit2 failed");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes_.data() + e.data_offset));
    z.next_out = reinterpret_cast<Bytef*>(data.data());
    uint64_t in_left = e.compressed, out_left = e.size;
    int rc = Z_OK;
    while (rc == Z_OK) {
      // zlib counts in uInt: refill the window a gigabyte at a time.
      const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
      const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
      z.avail_in = in_chunk;
      z.avail_out = out_chunk;
      rc = inflate(&z, Z_NO_FLUSH);
      in_left -= in_chunk - z.avail_in;
      out_left -= out_chunk - z.avail_out;
      if (rc == Z_OK && in_chunk == z.avail_in && out_chunk == z.avail_out) break;  // no progress
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END || out_left != 0) fail("record '" + name + "' is corrupted (bad deflate data or size)");
  }
  const uint32_t crc = crc32_of(data);
  if (crc != e.crc && !(e.crc == 0 && !data.empty())) {
    fail("record '" + name + "' is corrupted: its CRC-32 is " + hex32(crc) + " but the zip directory says " +
         hex32(e.crc));
  }
  return data;
}

}  // namespace megacpp::io::serialization
