#include "io/serialization/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "megacpp/errors.h"
#include "io/serialization/atomic_file.h"
#include "io/serialization/mapped_file_guard.h"
#include "io/serialization/text_encoding.h"

namespace megacpp::io::serialization {
namespace {

namespace fs = std::filesystem;

// The reference's 100 MB cap on the JSON header (MAX_HEADER_SIZE in tensor.rs).
constexpr uint64_t kMaxHeaderSize = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeInfo {
  const char* name;
  int bits;
};

// The reference Dtype enum, in declaration (= increasing alignment) order.
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 8},         {"F4", 4},           {"F6_E2M3", 6},     {"F6_E3M2", 6},
    {"U8", 8},           {"I8", 8},           {"F8_E5M2", 8},     {"F8_E4M3", 8},
    {"F8_E8M0", 8},      {"F8_E4M3FNUZ", 8},  {"F8_E5M2FNUZ", 8}, {"I16", 16},
    {"U16", 16},         {"F16", 16},         {"BF16", 16},       {"I32", 32},
    {"U32", 32},         {"F32", 32},         {"C64", 64},        {"F64", 64},
    {"I64", 64},         {"U64", 64},
};

int find_dtype(const std::string& dtype) {
  for (std::size_t i = 0; i < std::size(kDtypes); ++i) {
    if (dtype == kDtypes[i].name) return static_cast<int>(i);
  }
  return -1;
}

std::string offsets_string(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Strict UTF-8 (as Rust's str::from_utf8): no overlongs, no surrogates, <= U+10FFFF.
// Returns the offset of the first bad byte, or npos.
std::size_t find_invalid_utf8(const unsigned char* s, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string::npos;
}

bool valid_utf8(const std::string& s) {
  return find_invalid_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size()) ==
         std::string::npos;
}

// Throws std::runtime_error("<where>: <what>") / ("<where>: tensor '<name>': <what>").
struct Failer {
  std::string where;
  [[noreturn]] void operator()(const std::string& what) const { throw std::runtime_error(where + ": " + what); }
  [[noreturn]] void tensor(const std::string& name, const std::string& what) const {
    throw std::runtime_error(where + ": tensor '" + name + "': " + what);
  }
};

// ---- the writer's plan: validated tensors in layout order, and the header -----------------

struct Prepared {
  std::string header;                                       // padded JSON
  std::vector<std::pair<std::string, const TensorView*>> order;
};

Prepared prepare(const std::map<std::string, TensorView>& tensors,
                 const std::optional<SafetensorsMetadata>& metadata) {
  Prepared p;
  for (const auto& [name, view] : tensors) {
    const std::string where = "safetensors: tensor '" + name + "': ";
    if (name == kMetadataKey) {
      throw std::invalid_argument(where + "the name __metadata__ is reserved for the header's metadata");
    }
    if (!valid_utf8(name)) throw std::invalid_argument(where + "the name is not valid UTF-8");
    uint64_t expected;
    try {
      expected = tensor_nbytes(view.dtype, view.shape);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
    if (expected != view.nbytes) {
      throw std::invalid_argument(where + "has " + std::to_string(view.nbytes) + " bytes but dtype " +
                                  view.dtype + " and shape " + shape_string(view.shape) + " need " +
                                  std::to_string(expected));
    }
    if (view.nbytes > 0 && view.data == nullptr) {
      throw std::invalid_argument(where + "has " + std::to_string(view.nbytes) + " bytes but no data");
    }
    p.order.emplace_back(name, &view);
  }
  if (metadata) {
    for (const auto& [key, value] : *metadata) {
      if (!valid_utf8(key) || !valid_utf8(value)) {
        throw std::invalid_argument("safetensors: metadata entry '" + key + "' is not valid UTF-8");
      }
    }
  }
  // Descending dtype rank, then ascending name (std::string compares bytes, as Rust's str).
  std::stable_sort(p.order.begin(), p.order.end(), [](const auto& a, const auto& b) {
    const int ra = find_dtype(a.second->dtype), rb = find_dtype(b.second->dtype);
    if (ra != rb) return ra > rb;
    return a.first < b.first;
  });

  std::string& h = p.header;
  h.push_back('{');
  bool first = true;
  if (metadata) {
    append_json_string(h, kMetadataKey);
    h += ":{";
    bool first_entry = true;
    for (const auto& [key, value] : *metadata) {
      if (!first_entry) h.push_back(',');
      first_entry = false;
      append_json_string(h, key);
      h.push_back(':');
      append_json_string(h, value);
    }
    h.push_back('}');
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, view] : p.order) {
    if (!first) h.push_back(',');
    first = false;
    append_json_string(h, name);
    h += ":{\"dtype\":";
    append_json_string(h, view->dtype);
    h += ",\"shape\":[";
    for (std::size_t i = 0; i < view->shape.size(); ++i) {
      if (i) h.push_back(',');
      h += std::to_string(view->shape[i]);
    }
    h += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += view->nbytes;
    h += std::to_string(offset) + "]}";
  }
  h.push_back('}');
  h.append((8 - h.size() % 8) % 8, ' ');
  if (h.size() > kMaxHeaderSize) {
    throw std::invalid_argument("safetensors: the header would be " + std::to_string(h.size()) +
                                " bytes, over the format's limit of " + std::to_string(kMaxHeaderSize));
  }
  return p;
}

void put_u64_le(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Reads an unsigned JSON integer (serde's usize: no sign, no fraction).
bool json_u64(const nlohmann::json& j, uint64_t& out) {
  if (!j.is_number_unsigned()) return false;
  out = j.get<uint64_t>();
  return true;
}

// nlohmann keeps the last of duplicate keys silently; the callback records duplicates so a
// header like {"a": ..., "a": ...} is refused rather than half-read.
struct DuplicateKeyTracker {
  std::vector<std::set<std::string>> stack;
  std::string duplicate;
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      stack.emplace_back();
    } else if (event == E::object_end) {
      if (!stack.empty()) stack.pop_back();
    } else if (event == E::key && !stack.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!stack.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  }
};

nlohmann::json parse_json_checked(const char* begin, const char* end, const std::string& what) {
  DuplicateKeyTracker tracker;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(begin, end,
                              [&tracker](int d, nlohmann::json::parse_event_t e, nlohmann::json& p) {
                                return tracker(d, e, p);
                              });
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(what + ": invalid JSON: " + e.what());
  }
  if (!tracker.duplicate.empty()) {
    throw std::runtime_error(what + ": key '" + tracker.duplicate + "' appears more than once");
  }
  return j;
}

}  // namespace

// ---- dtypes --------------------------------------------------------------------------------

bool is_safetensors_dtype(const std::string& dtype) { return find_dtype(dtype) >= 0; }

int dtype_bits(const std::string& dtype) {
  const int i = find_dtype(dtype);
  if (i < 0) throw std::invalid_argument("unknown safetensors dtype '" + dtype + "'");
  return kDtypes[i].bits;
}

int dtype_rank(const std::string& dtype) {
  const int i = find_dtype(dtype);
  if (i < 0) throw std::invalid_argument("unknown safetensors dtype '" + dtype + "'");
  return i;
}

uint64_t tensor_nbytes(const std::string& dtype, const std::vector<int64_t>& shape) {
  const uint64_t bits = static_cast<uint64_t>(dtype_bits(dtype));
  uint64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("shape " + shape_string(shape) + " has a negative dimension");
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      throw std::invalid_argument("shape " + shape_string(shape) + " overflows");
    }
  }
  uint64_t total_bits;
  if (__builtin_mul_overflow(n, bits, &total_bits)) {
    throw std::invalid_argument("shape " + shape_string(shape) + " with dtype " + dtype + " overflows");
  }
  if (total_bits % 8 != 0) {
    throw std::invalid_argument("shape " + shape_string(shape) + " of dtype " + dtype +
                                " is not a whole number of bytes");
  }
  return total_bits / 8;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

// ---- reading -------------------------------------------------------------------------------

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  std::size_t length = 0;
  std::unique_ptr<MappedFileGuard> guard;  // names the file if it shrinks under the mapping
  ~Mapping() {
    guard.reset();  // before the range can be mapped again by someone else
    if (addr) ::munmap(addr, length);
  }
};

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const std::string where = "safetensors file '" + path + "'";
  const Failer fail{where};

  SafetensorsFile f;
  f.path_ = path;
  f.mapping_ = std::make_shared<Mapping>();

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string e = errno_text();
    ::close(fd);
    fail("cannot stat: " + e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("not a regular file");
  }
  f.file_size_ = static_cast<uint64_t>(st.st_size);
  if (f.file_size_ < 8) {
    ::close(fd);
    fail("is " + std::to_string(f.file_size_) + " bytes, too small for the 8-byte header size");
  }
  void* addr = ::mmap(nullptr, f.file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string mmap_error = addr == MAP_FAILED ? errno_text() : "";
  ::close(fd);
  if (addr == MAP_FAILED) fail("cannot mmap: " + mmap_error);
  f.mapping_->addr = addr;
  f.mapping_->length = f.file_size_;
  f.mapping_->guard = std::make_unique<MappedFileGuard>(addr, f.file_size_, path);
  const auto* bytes = static_cast<const uint8_t*>(addr);

  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  f.header_size_ = n;
  if (n > kMaxHeaderSize) {
    fail("header size " + std::to_string(n) + " is over the format's limit of " +
         std::to_string(kMaxHeaderSize) + " bytes");
  }
  if (8 + n > f.file_size_) {
    fail("header size " + std::to_string(n) + " runs past the end of the " + std::to_string(f.file_size_) +
         "-byte file (truncated?)");
  }
  const auto* header = reinterpret_cast<const char*>(bytes + 8);
  const std::size_t bad = find_invalid_utf8(bytes + 8, n);
  if (bad != std::string::npos) fail("header is not valid UTF-8 (byte " + std::to_string(8 + bad) + ")");
  if (n == 0 || header[0] != '{') fail("header does not start with '{'");

  const nlohmann::json j = parse_json_checked(header, header + n, where + ": header");
  if (!j.is_object()) fail("header is not a JSON object");

  const uint64_t buffer_len = f.file_size_ - 8 - n;
  for (const auto& [name, value] : j.items()) {
    if (name == kMetadataKey) {
      if (value.is_null()) continue;
      if (!value.is_object()) fail("__metadata__ is not an object of strings");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) fail("__metadata__ entry '" + key + "' is not a string");
        f.metadata_[key] = v.get<std::string>();
      }
      f.has_metadata_ = true;
      continue;
    }
    if (!value.is_object()) fail.tensor(name, "entry is not an object");
    Entry e;
    const auto dtype = value.find("dtype");
    if (dtype == value.end()) fail.tensor(name, "has no dtype");
    if (!dtype->is_string() || !is_safetensors_dtype(dtype->get<std::string>())) {
      fail.tensor(name, "unknown dtype " + dtype->dump());
    }
    e.dtype = dtype->get<std::string>();
    const auto shape = value.find("shape");
    if (shape == value.end()) fail.tensor(name, "has no shape");
    if (!shape->is_array()) fail.tensor(name, "shape " + shape->dump() + " is not an array");
    for (const auto& d : *shape) {
      uint64_t v;
      if (!json_u64(d, v) || v > static_cast<uint64_t>(INT64_MAX)) {
        fail.tensor(name, "shape " + shape->dump() + " is not a list of non-negative integers");
      }
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const auto offsets = value.find("data_offsets");
    if (offsets == value.end()) fail.tensor(name, "has no data_offsets");
    if (!offsets->is_array() || offsets->size() != 2 || !json_u64((*offsets)[0], e.begin) ||
        !json_u64((*offsets)[1], e.end)) {
      fail.tensor(name, "data_offsets " + offsets->dump() + " are not two non-negative integers");
    }
    if (e.end < e.begin) fail.tensor(name, "data_offsets " + offsets_string(e.begin, e.end) + " end before they begin");
    if (e.end > buffer_len) {
      fail.tensor(name, "data_offsets " + offsets_string(e.begin, e.end) + " are out of range of the " +
                            std::to_string(buffer_len) + "-byte data buffer");
    }
    uint64_t expected;
    try {
      expected = tensor_nbytes(e.dtype, e.shape);
    } catch (const std::invalid_argument& ex) {
      fail.tensor(name, ex.what());
    }
    if (e.end - e.begin != expected) {
      fail.tensor(name, "data_offsets " + offsets_string(e.begin, e.end) + " span " +
                            std::to_string(e.end - e.begin) + " bytes but dtype " + e.dtype + " and shape " +
                            shape_string(e.shape) + " need " + std::to_string(expected));
    }
    f.entries_.emplace(name, std::move(e));
  }

  // As Metadata::validate: sorted by offsets, the tensors must tile the buffer exactly.
  std::vector<const std::pair<const std::string, Entry>*> sorted;
  for (const auto& kv : f.entries_) sorted.push_back(&kv);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->second.begin, a->second.end) < std::make_pair(b->second.begin, b->second.end);
  });
  uint64_t expected_begin = 0;
  const std::pair<const std::string, Entry>* previous = nullptr;
  for (const auto* kv : sorted) {
    const Entry& e = kv->second;
    if (e.begin < expected_begin) {
      fail.tensor(kv->first, "data_offsets " + offsets_string(e.begin, e.end) + " overlap tensor '" +
                                 previous->first + "' " +
                                 offsets_string(previous->second.begin, previous->second.end));
    }
    if (e.begin > expected_begin) {
      fail.tensor(kv->first, "data_offsets " + offsets_string(e.begin, e.end) + " leave a hole: bytes [" +
                                 std::to_string(expected_begin) + ", " + std::to_string(e.begin) +
                                 ") of the data buffer belong to no tensor");
    }
    expected_begin = e.end;
    previous = kv;
    f.file_order_.push_back(kv->first);
  }
  if (expected_begin != buffer_len) {
    fail("the tensors cover " + std::to_string(expected_begin) + " bytes of the " + std::to_string(buffer_len) +
         "-byte data buffer; bytes [" + std::to_string(expected_begin) + ", " + std::to_string(buffer_len) +
         ") belong to no tensor" + (previous ? " (the last tensor is '" + previous->first + "')" : ""));
  }
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> SafetensorsFile::names_in_file_order() const { return file_order_; }

bool SafetensorsFile::contains(const std::string& name) const { return entries_.count(name) != 0; }

TensorView SafetensorsFile::tensor(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw std::runtime_error("safetensors file '" + path_ + "': no tensor '" + name + "'");
  }
  const Entry& e = it->second;
  const auto* base = static_cast<const uint8_t*>(mapping_->addr) + data_start();
  return TensorView{e.dtype, e.shape, base + e.begin, static_cast<std::size_t>(e.end - e.begin)};
}

std::pair<uint64_t, uint64_t> SafetensorsFile::data_offsets(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw std::runtime_error("safetensors file '" + path_ + "': no tensor '" + name + "'");
  }
  return {it->second.begin, it->second.end};
}

// ---- writing -------------------------------------------------------------------------------

std::vector<std::string> safetensors_layout_order(const std::map<std::string, TensorView>& tensors) {
  std::vector<std::string> names;
  for (const auto& kv : tensors) names.push_back(kv.first);
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    const int ra = dtype_rank(tensors.at(a).dtype), rb = dtype_rank(tensors.at(b).dtype);
    if (ra != rb) return ra > rb;
    return a < b;
  });
  return names;
}

std::vector<uint8_t> serialize_safetensors(const std::map<std::string, TensorView>& tensors,
                                           const std::optional<SafetensorsMetadata>& metadata) {
  const Prepared p = prepare(tensors, metadata);
  std::size_t total = 8 + p.header.size();
  for (const auto& kv : p.order) total += kv.second->nbytes;
  std::vector<uint8_t> out(8);
  out.reserve(total);
  put_u64_le(out.data(), p.header.size());
  out.insert(out.end(), p.header.begin(), p.header.end());
  for (const auto& kv : p.order) {
    if (kv.second->nbytes) out.insert(out.end(), kv.second->data, kv.second->data + kv.second->nbytes);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, TensorView>& tensors,
                       const std::optional<SafetensorsMetadata>& metadata) {
  const Prepared p = prepare(tensors, metadata);
  AtomicFile file(path);
  uint8_t size[8];
  put_u64_le(size, p.header.size());
  file.write(size, 8);
  file.write(p.header.data(), p.header.size());
  for (const auto& kv : p.order) file.write(kv.second->data, kv.second->nbytes);
  file.commit();
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::optional<SafetensorsMetadata>& metadata) {
  std::map<std::string, TensorView> views;
  for (const auto& [name, t] : tensors) views.emplace(name, t.view());
  write_safetensors(path, views, metadata);
}

// ---- sharded checkpoints -------------------------------------------------------------------

ShardPlan plan_safetensors_shards(const std::vector<std::pair<std::string, uint64_t>>& tensors,
                                  uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) throw std::invalid_argument("safetensors shards: max_shard_bytes must be > 0");
  std::set<std::string> seen;
  std::vector<std::vector<std::string>> shards;
  std::vector<std::string> current;
  uint64_t current_size = 0;
  ShardPlan plan;
  for (const auto& [name, size] : tensors) {
    if (!seen.insert(name).second) {
      throw std::invalid_argument("safetensors shards: tensor '" + name + "' given twice");
    }
    plan.total_size += size;
    if (size > max_shard_bytes) {  // a shard of its own, ahead of the one being filled
      shards.push_back({name});
      continue;
    }
    if (current_size + size > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(name);
    current_size += size;
  }
  if (!current.empty()) shards.push_back(std::move(current));

  const std::size_t count = shards.size();
  for (std::size_t i = 0; i < count; ++i) {
    std::string filename = kSafetensorsSingleName;
    if (count > 1) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, count);
      filename = buf;
    }
    for (const auto& name : shards[i]) plan.weight_map[name] = filename;
    plan.filenames.push_back(filename);
  }
  plan.shards = std::move(shards);
  return plan;
}

uint64_t SafetensorsIndex::total_size() const {
  const auto it = metadata.find("total_size");
  uint64_t v;
  if (it == metadata.end() || !json_u64(*it, v)) {
    throw std::runtime_error("safetensors index: metadata.total_size is missing or not a non-negative integer");
  }
  return v;
}

std::vector<std::string> SafetensorsIndex::filenames() const {
  std::set<std::string> files;
  for (const auto& kv : weight_map) files.insert(kv.second);
  return {files.begin(), files.end()};
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
  const std::string where = "safetensors index '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + ": cannot open: " + errno_text());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const nlohmann::json j = parse_json_checked(text.data(), text.data() + text.size(), where);
  if (!j.is_object()) throw std::runtime_error(where + ": not a JSON object");
  SafetensorsIndex index;
  if (const auto m = j.find("metadata"); m != j.end() && !m->is_null()) {
    if (!m->is_object()) throw std::runtime_error(where + ": \"metadata\" is not an object");
    index.metadata = *m;
  }
  const auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw std::runtime_error(where + ": no \"weight_map\" object");
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) throw std::runtime_error(where + ": weight_map entry '" + name + "' is not a string");
    const std::string filename = file.get<std::string>();
    // Shards live beside the index; refuse anything that would reach elsewhere.
    if (filename.empty() || filename == "." || filename == ".." ||
        filename.find_first_of("/\\") != std::string::npos) {
      throw std::runtime_error(where + ": weight_map entry '" + name + "' names file '" + filename +
                               "', not a file name in the index's directory");
    }
    index.weight_map[name] = filename;
  }
  return index;
}

void write_safetensors_index(const std::string& path, const SafetensorsIndex& index) {
  nlohmann::json j = nlohmann::json::object();
  j["metadata"] = index.metadata.is_null() ? nlohmann::json::object() : index.metadata;
  j["weight_map"] = index.weight_map;
  const std::string text = j.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

ShardPlan save_safetensors_sharded(const std::string& directory,
                                   const std::vector<std::pair<std::string, TensorView>>& tensors,
                                   uint64_t max_shard_bytes,
                                   const std::optional<SafetensorsMetadata>& metadata) {
  std::vector<std::pair<std::string, uint64_t>> sizes;
  std::map<std::string, const TensorView*> by_name;
  for (const auto& [name, view] : tensors) {
    sizes.emplace_back(name, view.nbytes);
    by_name[name] = &view;
  }
  ShardPlan plan = plan_safetensors_shards(sizes, max_shard_bytes);
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) throw std::runtime_error("safetensors: cannot create directory '" + directory + "': " + ec.message());
  for (std::size_t i = 0; i < plan.shards.size(); ++i) {
    std::map<std::string, TensorView> shard;
    for (const auto& name : plan.shards[i]) shard.emplace(name, *by_name.at(name));
    write_safetensors((fs::path(directory) / plan.filenames[i]).string(), shard, metadata);
  }
  if (plan.is_sharded()) {
    SafetensorsIndex index;
    index.metadata["total_size"] = plan.total_size;
    index.weight_map = plan.weight_map;
    write_safetensors_index((fs::path(directory) / kSafetensorsIndexName).string(), index);
  }
  return plan;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& directory) {
  SafetensorsCheckpoint c;
  c.directory_ = directory;
  const fs::path dir(directory);
  const fs::path index_path = dir / kSafetensorsIndexName;
  const fs::path single_path = dir / kSafetensorsSingleName;
  if (fs::exists(index_path)) {
    c.sharded_ = true;
    c.index_ = read_safetensors_index(index_path.string());
    for (const auto& filename : c.index_.filenames()) {
      c.files_.emplace(filename, SafetensorsFile::open((dir / filename).string()));
    }
    for (const auto& [name, filename] : c.index_.weight_map) {
      const SafetensorsFile& f = c.files_.at(filename);
      if (!f.contains(name)) {
        throw std::runtime_error("safetensors index '" + index_path.string() + "': tensor '" + name +
                                 "' is mapped to '" + filename + "', which does not contain it");
      }
      c.where_[name] = filename;
    }
  } else if (fs::exists(single_path)) {
    SafetensorsFile f = SafetensorsFile::open(single_path.string());
    uint64_t total = 0;
    for (const auto& name : f.names()) {
      c.index_.weight_map[name] = kSafetensorsSingleName;
      c.where_[name] = kSafetensorsSingleName;
      total += f.tensor(name).nbytes;
    }
    c.index_.metadata["total_size"] = total;
    c.files_.emplace(kSafetensorsSingleName, std::move(f));
  } else {
    throw std::runtime_error("safetensors checkpoint '" + directory + "': neither " + kSafetensorsIndexName +
                             " nor " + kSafetensorsSingleName + " found");
  }
  return c;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

const std::string& SafetensorsCheckpoint::filename_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) {
    throw std::runtime_error("safetensors checkpoint '" + directory_ + "': no tensor '" + name + "'");
  }
  return it->second;
}

TensorView SafetensorsCheckpoint::tensor(const std::string& name) const {
  return files_.at(filename_of(name)).tensor(name);
}

const SafetensorsFile& SafetensorsCheckpoint::file(const std::string& filename) const {
  const auto it = files_.find(filename);
  if (it == files_.end()) {
    throw std::runtime_error("safetensors checkpoint '" + directory_ + "': no shard '" + filename + "'");
  }
  return it->second;
}

std::vector<std::string> SafetensorsCheckpoint::filenames() const {
  std::vector<std::string> out;
  for (const auto& kv : files_) out.push_back(kv.first);
  return out;
}

}  // namespace megacpp::io::serialization
