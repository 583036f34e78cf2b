// Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx, "MMIDIDX" version 1): the reader
// memory-maps both files read-only and validates the index once on open; the writer follows
// IndexedDatasetBuilder (add_item / end_document / finalize). The layout is documented at the
// top of indexed_dataset.h.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/serialization/mapped_file_guard.h"
#include "io/data/token_dataset_internal.h"
#include "megacpp/errors.h"

namespace megacpp::io::data::detail {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
// magic (9) + version (8) + dtype code (1) + sequence count (8) + document count (8).
constexpr size_t kHeaderBytes = 34;

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A whole file mapped read-only; an empty file maps to nothing (data() == nullptr).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw std::runtime_error(path + ": cannot open (" + errno_text() + ")" +
                               (errno == ENOENT ? "; a Megatron dataset needs PREFIX.bin and PREFIX.idx" : ""));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const std::string err = errno_text();
      ::close(fd);
      throw std::runtime_error(path + ": cannot stat (" + err + ")");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const std::string err = errno_text();
        ::close(fd);
        throw std::runtime_error(path + ": cannot mmap (" + err + ")");
      }
      data_ = static_cast<const unsigned char*>(p);
      guard_ = std::make_unique<serialization::MappedFileGuard>(data_, size_, path);
    }
    ::close(fd);  // the mapping keeps the file alive
  }
  ~MappedFile() {
    guard_.reset();  // before the range can be mapped again by someone else
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<serialization::MappedFileGuard> guard_;  // names this file if it shrinks under the mapping
};

class MmapTokenDataset final : public TokenDataset {
 public:
  explicit MmapTokenDataset(const std::string& prefix)
      : prefix_(prefix), idx_(prefix + ".idx"), bin_(prefix + ".bin") {
    parse_header();
    validate_sequences();
    document_indices_.resize(document_count_);
    if (document_count_ > 0) {
      std::memcpy(document_indices_.data(), documents_, document_count_ * sizeof(int64_t));
    }
    validate_document_indices(document_indices_, num_sequences(), idx_.path());
  }

  int64_t num_sequences() const override { return static_cast<int64_t>(sequence_count_); }

  int64_t sequence_length(int64_t sequence) const override {
    check_read_range(sequence, num_sequences(), 0, 0, 0, prefix_);
    return length_at(sequence);
  }

  void read(int64_t sequence, int64_t offset, int64_t count, int64_t* out) const override {
    check_read_range(sequence, num_sequences(), 0, 0, 0, prefix_);
    check_read_range(sequence, num_sequences(), offset, count, length_at(sequence), prefix_);
    if (count == 0) return;
    const int64_t byte = pointer_at(sequence) + offset * static_cast<int64_t>(dtype_bytes_);
    const serialization::MappedReadScope reading("sequence", sequence);
    widen_tokens(dtype_, bin_.data() + byte, count, out, prefix_ + ".bin", sequence);
  }

  const std::vector<int64_t>& document_indices() const override { return document_indices_; }
  TokenDtype dtype() const override { return dtype_; }
  const std::string& path() const override { return prefix_; }

 private:
  int64_t length_at(int64_t i) const { return load<int32_t>(lengths_ + 4 * i); }
  int64_t pointer_at(int64_t i) const { return load<int64_t>(pointers_ + 8 * i); }

  void parse_header() {
    const std::string& file = idx_.path();
    const unsigned char* p = idx_.data();
    const size_t size = idx_.size();
    if (size < kHeaderBytes) {
      throw std::runtime_error(file + ": truncated index: " + std::to_string(size) +
                               " bytes, the MMIDIDX header alone is " + std::to_string(kHeaderBytes));
    }
    if (std::memcmp(p, kMagic, sizeof kMagic) != 0) {
      throw std::runtime_error(file + ": bad magic: not a Megatron indexed dataset index (expected \"MMIDIDX\\0\\0\")");
    }
    const uint64_t version = load<uint64_t>(p + 9);
    if (version != kVersion) {
      throw std::runtime_error(file + ": unsupported index version " + std::to_string(version) + " (only 1 is known)");
    }
    const uint8_t code = p[17];
    if (!is_valid_dtype_code(code)) {
      throw std::runtime_error(file + ": unknown dtype code " + std::to_string(code) + " (Megatron's codes are 1..8)");
    }
    dtype_ = static_cast<TokenDtype>(code);
    dtype_bytes_ = dtype_size(dtype_);
    sequence_count_ = load<uint64_t>(p + 18);
    document_count_ = load<uint64_t>(p + 26);
    // Each sequence takes 12 bytes and each document 8, so a count above the file size is
    // truncation; below it the byte total cannot overflow.
    const uint64_t n = sequence_count_, d = document_count_;
    const bool fits = n <= size && d <= size;
    const uint64_t expected = fits ? kHeaderBytes + 12 * n + 8 * d : 0;
    if (!fits || size < expected) {
      throw std::runtime_error(file + ": truncated index: " + std::to_string(size) + " bytes, but the header's " +
                               std::to_string(n) + " sequences and " + std::to_string(d) + " document indices need " +
                               (fits ? std::to_string(expected) : std::string("more")));
    }
    if (size > expected) {
      if (n > 0 && size - expected == n) {
        throw std::runtime_error(file + ": has a multimodal sequence_modes section, which megacpp does not support");
      }
      throw std::runtime_error(file + ": " + std::to_string(size - expected) +
                               " unexpected bytes after the document indices (corrupt or not MMIDIDX version 1)");
    }
    lengths_ = p + kHeaderBytes;
    pointers_ = lengths_ + 4 * n;
    documents_ = pointers_ + 8 * n;
  }

  void validate_sequences() {
    const auto bin_size = static_cast<int64_t>(bin_.size());
    const auto item = static_cast<int64_t>(dtype_bytes_);
    for (int64_t i = 0; i < num_sequences(); ++i) {
      const int64_t length = length_at(i), pointer = pointer_at(i);
      if (length < 0) {
        throw std::runtime_error(idx_.path() + ": sequence " + std::to_string(i) + " has negative length " +
                                 std::to_string(length));
      }
      if (pointer < 0 || pointer > bin_size || length > (bin_size - pointer) / item) {
        throw std::runtime_error(bin_.path() + ": sequence " + std::to_string(i) + " of " + idx_.path() +
                                 " (byte " + std::to_string(pointer) + ", " + std::to_string(length) + " " +
                                 dtype_name(dtype_) + " tokens) lies beyond the end of the file (" +
                                 std::to_string(bin_size) + " bytes)");
      }
      num_tokens_ += length;
    }
  }

  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  TokenDtype dtype_ = TokenDtype::kUInt16;
  size_t dtype_bytes_ = 2;
  uint64_t sequence_count_ = 0;
  uint64_t document_count_ = 0;
  // Views into the mapped index; unaligned (the header is 34 bytes), so read with memcpy.
  const unsigned char* lengths_ = nullptr;    // int32 [sequence_count_]
  const unsigned char* pointers_ = nullptr;   // int64 [sequence_count_]
  const unsigned char* documents_ = nullptr;  // int64 [document_count_]
  std::vector<int64_t> document_indices_;     // [document_count_]
};

// A FILE* that closes itself; `path` is kept for messages.
struct OutFile {
  std::string path;
  FILE* f = nullptr;

  explicit OutFile(std::string p) : path(std::move(p)) {
    f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error(path + ": cannot create (" + errno_text() + ")");
  }
  ~OutFile() {
    if (f != nullptr) std::fclose(f);
  }
  void write(const void* data, size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes) {
      throw std::runtime_error(path + ": write failed (" + errno_text() + ")");
    }
  }
  // Flushes to the disk and closes, so a later rename publishes complete data.
  void sync_and_close() {
    const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    const std::string err = ok ? "" : errno_text();
    const bool closed = std::fclose(f) == 0;
    f = nullptr;
    if (!ok || !closed) throw std::runtime_error(path + ": cannot flush to disk (" + err + ")");
  }
};

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + from + " to " + to + " (" + errno_text() + ")");
  }
}

class MmapTokenWriter final : public TokenDatasetWriter {
 public:
  MmapTokenWriter(const std::string& prefix, TokenDtype dtype)
      : prefix_(prefix), dtype_(dtype), bin_(std::make_unique<OutFile>(prefix + ".bin.tmp")) {}

  ~MmapTokenWriter() override {
    if (finalized_) return;
    bin_.reset();
    std::remove((prefix_ + ".bin.tmp").c_str());
    std::remove((prefix_ + ".idx.tmp").c_str());
  }

  void add_sequence(const int64_t* tokens, int64_t count) override {
    check_open("add_sequence");
    if (count < 0 || count > std::numeric_limits<int32_t>::max()) {
      throw std::invalid_argument(prefix_ + ".bin: sequence of " + std::to_string(count) +
                                  " tokens (the .idx stores lengths as int32)");
    }
    buffer_.clear();
    narrow_tokens(dtype_, tokens, count, buffer_, prefix_ + ".bin");
    bin_->write(buffer_.data(), buffer_.size());
    lengths_.push_back(static_cast<int32_t>(count));
  }

  void end_document() override {
    check_open("end_document");
    document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
  }

  void finalize() override {
    check_open("finalize");
    if (document_indices_.back() != static_cast<int64_t>(lengths_.size())) {
      throw std::logic_error(prefix_ + ": sequences added after the last end_document(); end the document first");
    }
    bin_->sync_and_close();
    write_index(prefix_ + ".idx.tmp");
    // The old index goes first, so a crash between the renames leaves no .idx next to the
    // new .bin rather than a stale one that might still validate.
    if (std::remove((prefix_ + ".idx").c_str()) != 0 && errno != ENOENT) {
      throw std::runtime_error(prefix_ + ".idx: cannot replace (" + errno_text() + ")");
    }
    rename_or_throw(prefix_ + ".bin.tmp", prefix_ + ".bin");
    rename_or_throw(prefix_ + ".idx.tmp", prefix_ + ".idx");
    finalized_ = true;
  }

 private:
  void check_open(const char* what) const {
    if (finalized_) throw std::logic_error(prefix_ + ": " + what + "() after finalize()");
  }

  // _IndexWriter: header, lengths, pointers (running byte offsets), document indices.
  void write_index(const std::string& path) {
    OutFile idx(path);
    const uint64_t n = lengths_.size(), d = document_indices_.size();
    const auto code = static_cast<uint8_t>(dtype_);
    idx.write(kMagic, sizeof kMagic);
    idx.write(&kVersion, 8);
    idx.write(&code, 1);
    idx.write(&n, 8);
    idx.write(&d, 8);
    idx.write(lengths_.data(), n * sizeof(int32_t));
    std::vector<int64_t> pointers;
    pointers.reserve(std::min<uint64_t>(n, 1 << 16));
    int64_t pointer = 0;
    const auto item = static_cast<int64_t>(dtype_size(dtype_));
    for (uint64_t i = 0; i < n; ++i) {
      pointers.push_back(pointer);
      pointer += lengths_[i] * item;
      if (pointers.size() == pointers.capacity() || i + 1 == n) {
        idx.write(pointers.data(), pointers.size() * sizeof(int64_t));
        pointers.clear();
      }
    }
    idx.write(document_indices_.data(), d * sizeof(int64_t));
    idx.sync_and_close();
  }

  std::string prefix_;
  TokenDtype dtype_;
  std::unique_ptr<OutFile> bin_;         // PREFIX.bin.tmp until finalize()
  std::vector<int32_t> lengths_;         // [sequences]
  std::vector<int64_t> document_indices_{0};  // [documents + 1]
  std::vector<unsigned char> buffer_;    // one sequence in the dtype
  bool finalized_ = false;
};

}  // namespace

std::unique_ptr<TokenDataset> open_mmap_dataset(const std::string& prefix) {
  return std::make_unique<MmapTokenDataset>(prefix);
}

std::unique_ptr<TokenDatasetWriter> create_mmap_writer(const std::string& prefix, TokenDtype dtype) {
  return std::make_unique<MmapTokenWriter>(prefix, dtype);
}

}  // namespace megacpp::io::data::detail
