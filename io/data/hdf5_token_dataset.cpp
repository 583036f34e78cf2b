// Token datasets in one HDF5 file (/tokens, /sequence_lengths, /document_indices; layout at the
// top of indexed_dataset.h). The index is loaded on open; tokens are read range by range with
// hyperslab selections, never the whole array.
//
// Note [HDF5 lock]: HDF5 built without --enable-threadsafe must not be entered by two threads at
// once, even for different files, so every HDF5 call in this file holds one process-wide
// (recursive) mutex; handles take it again when they close.
// Automatic error printing is switched off inside that lock (and restored), since failures
// become exceptions that name the file.
#include <hdf5.h>
#include <sys/stat.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/data/token_dataset_internal.h"

namespace megacpp::io::data::detail {
namespace {

constexpr hsize_t kChunkTokens = 1 << 16;  // small enough for HDF5's default 1 MiB chunk cache

// Recursive: handles close themselves under the lock, also inside a guarded section.
std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

// Holds the HDF5 lock with automatic error printing off. See Note [HDF5 lock].
class Hdf5Guard {
 public:
  Hdf5Guard() : lock_(hdf5_mutex()) {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Hdf5Guard() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  std::lock_guard<std::recursive_mutex> lock_;
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// An HDF5 identifier closed by `close` (H5Fclose, H5Dclose, ...).
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  void reset() {
    if (id_ >= 0 && close_ != nullptr) {
      std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
      close_(id_);
    }
    id_ = -1;
  }
  hid_t get() const { return id_; }
  // Gives up ownership without closing.
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

Handle checked(hid_t id, herr_t (*close)(hid_t), const std::string& file, const char* what) {
  if (id < 0) throw std::runtime_error(file + ": HDF5 " + what + " failed");
  return Handle(id, close);
}

void check(herr_t status, const std::string& file, const char* what) {
  if (status < 0) throw std::runtime_error(file + ": HDF5 " + what + " failed");
}

// The little-endian file type and the native memory type of a dtype.
hid_t file_type(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUInt8: return H5T_STD_U8LE;
    case TokenDtype::kInt8: return H5T_STD_I8LE;
    case TokenDtype::kInt16: return H5T_STD_I16LE;
    case TokenDtype::kInt32: return H5T_STD_I32LE;
    case TokenDtype::kInt64: return H5T_STD_I64LE;
    case TokenDtype::kFloat64: return H5T_IEEE_F64LE;
    case TokenDtype::kFloat32: return H5T_IEEE_F32LE;
    case TokenDtype::kUInt16: return H5T_STD_U16LE;
  }
  throw std::invalid_argument("invalid token dtype");
}

// Tokens [start, start + n) of a 1-D dataset: the file-side selection and the matching
// memory space, for one H5Dread or H5Dwrite.
struct TokenRange {
  TokenRange(const Handle& dataset, hsize_t start, hsize_t n, const std::string& file_name)
      : file(checked(H5Dget_space(dataset.get()), H5Sclose, file_name, "H5Dget_space")),
        memory(checked(H5Screate_simple(1, &n, nullptr), H5Sclose, file_name, "H5Screate_simple")) {
    check(H5Sselect_hyperslab(file.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr), file_name, "H5Sselect_hyperslab");
  }
  Handle file, memory;
};

hid_t memory_type(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUInt8: return H5T_NATIVE_UINT8;
    case TokenDtype::kInt8: return H5T_NATIVE_INT8;
    case TokenDtype::kInt16: return H5T_NATIVE_INT16;
    case TokenDtype::kInt32: return H5T_NATIVE_INT32;
    case TokenDtype::kInt64: return H5T_NATIVE_INT64;
    case TokenDtype::kFloat64: return H5T_NATIVE_DOUBLE;
    case TokenDtype::kFloat32: return H5T_NATIVE_FLOAT;
    case TokenDtype::kUInt16: return H5T_NATIVE_UINT16;
  }
  throw std::invalid_argument("invalid token dtype");
}

// The dtype whose HDF5 type `type` is; throws naming the file for any other type.
TokenDtype dtype_of(hid_t type, const std::string& file) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
      case 1: return is_signed ? TokenDtype::kInt8 : TokenDtype::kUInt8;
      case 2: if (is_signed) return TokenDtype::kInt16; return TokenDtype::kUInt16;
      case 4: if (is_signed) return TokenDtype::kInt32; break;
      case 8: if (is_signed) return TokenDtype::kInt64; break;
    }
    throw std::runtime_error(file + ": unknown dtype: /tokens is a " + std::string(is_signed ? "signed" : "unsigned") +
                             " " + std::to_string(8 * size) + "-bit integer, which has no Megatron dtype code");
  }
  if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
    return size == 4 ? TokenDtype::kFloat32 : TokenDtype::kFloat64;
  }
  throw std::runtime_error(file + ": unknown dtype: /tokens is neither an integer nor a 32/64-bit float type");
}

// Opens the 1-D dataset `name`; returns it and its length.
Handle open_vector(hid_t file_id, const char* name, const std::string& file, hsize_t* length) {
  if (H5Lexists(file_id, name, H5P_DEFAULT) <= 0) {
    throw std::runtime_error(file + ": missing dataset /" + std::string(name) +
                             " (a megacpp token file holds /tokens, /sequence_lengths, /document_indices)");
  }
  Handle dataset = checked(H5Dopen2(file_id, name, H5P_DEFAULT), H5Dclose, file, "H5Dopen2");
  Handle space = checked(H5Dget_space(dataset.get()), H5Sclose, file, "H5Dget_space");
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw std::runtime_error(file + ": /" + std::string(name) + " must be 1-D");
  }
  check(H5Sget_simple_extent_dims(space.get(), length, nullptr), file, "H5Sget_simple_extent_dims");
  return dataset;
}

// Reads a whole 1-D integer dataset as int64 (the index: one entry per sequence or document).
std::vector<int64_t> read_index_vector(hid_t file_id, const char* name, const std::string& file) {
  hsize_t length = 0;
  Handle dataset = open_vector(file_id, name, file, &length);
  Handle type = checked(H5Dget_type(dataset.get()), H5Tclose, file, "H5Dget_type");
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    throw std::runtime_error(file + ": /" + std::string(name) + " must be an integer dataset");
  }
  std::vector<int64_t> values(length);
  if (length > 0) {
    check(H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), file,
          "H5Dread (index)");
  }
  return values;
}

class Hdf5TokenDataset final : public TokenDataset {
 public:
  explicit Hdf5TokenDataset(const std::string& file) : file_(file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) throw std::runtime_error(file + ": no such file");
    Hdf5Guard guard;
    if (H5Fis_hdf5(file.c_str()) <= 0) throw std::runtime_error(file + ": not an HDF5 file (bad magic)");
    const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) {  // the signature is there, the rest is not: cut short or damaged
      throw std::runtime_error(file + ": an HDF5 file HDF5 cannot open (" + std::to_string(st.st_size) +
                               " bytes; truncated or damaged?): write it again with megacpp-preprocess --output-format hdf5");
    }
    file_id_ = Handle(id, H5Fclose);
    hsize_t total = 0;
    tokens_ = open_vector(file_id_.get(), "tokens", file, &total);
    Handle type = checked(H5Dget_type(tokens_.get()), H5Tclose, file, "H5Dget_type");
    dtype_ = dtype_of(type.get(), file);
    const std::vector<int64_t> lengths = read_index_vector(file_id_.get(), "sequence_lengths", file);
    starts_.reserve(lengths.size() + 1);
    starts_.push_back(0);
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] < 0 || lengths[i] > static_cast<int64_t>(total) - starts_.back()) {
        throw std::runtime_error(file + ": sequence " + std::to_string(i) + " (" + std::to_string(lengths[i]) +
                                 " tokens from token " + std::to_string(starts_.back()) +
                                 ") lies beyond the end of /tokens (" + std::to_string(total) + " tokens)");
      }
      starts_.push_back(starts_.back() + lengths[i]);
    }
    if (starts_.back() != static_cast<int64_t>(total)) {
      throw std::runtime_error(file + ": /sequence_lengths sum to " + std::to_string(starts_.back()) +
                               " but /tokens holds " + std::to_string(total) + " tokens");
    }
    num_tokens_ = starts_.back();
    document_indices_ = read_index_vector(file_id_.get(), "document_indices", file);
    validate_document_indices(document_indices_, num_sequences(), file);
  }

  int64_t num_sequences() const override { return static_cast<int64_t>(starts_.size()) - 1; }

  int64_t sequence_length(int64_t sequence) const override {
    check_read_range(sequence, num_sequences(), 0, 0, 0, file_);
    return starts_[sequence + 1] - starts_[sequence];
  }

  void read(int64_t sequence, int64_t offset, int64_t count, int64_t* out) const override {
    check_read_range(sequence, num_sequences(), offset, count, sequence_length(sequence), file_);
    if (count == 0) return;
    std::vector<unsigned char> raw(static_cast<size_t>(count) * dtype_size(dtype_));
    {
      Hdf5Guard guard;
      const TokenRange range(tokens_, static_cast<hsize_t>(starts_[sequence] + offset), static_cast<hsize_t>(count), file_);
      check(H5Dread(tokens_.get(), memory_type(dtype_), range.memory.get(), range.file.get(), H5P_DEFAULT, raw.data()),
            file_, "H5Dread (tokens)");
    }
    widen_tokens(dtype_, raw.data(), count, out, file_, sequence);
  }

  const std::vector<int64_t>& document_indices() const override { return document_indices_; }
  TokenDtype dtype() const override { return dtype_; }
  const std::string& path() const override { return file_; }

 private:
  std::string file_;
  Handle file_id_;
  Handle tokens_;                          // /tokens
  TokenDtype dtype_ = TokenDtype::kUInt16;
  std::vector<int64_t> starts_;            // [sequences + 1] token offset of each sequence, then the total
  std::vector<int64_t> document_indices_;  // [documents + 1]
};

class Hdf5TokenWriter final : public TokenDatasetWriter {
 public:
  Hdf5TokenWriter(const std::string& file, TokenDtype dtype) : file_(file), tmp_(file + ".tmp"), dtype_(dtype) {
    try {
      create();
    } catch (...) {
      tokens_.reset();
      file_id_.reset();
      std::remove(tmp_.c_str());
      throw;
    }
  }

  ~Hdf5TokenWriter() override {
    if (finalized_) return;
    tokens_.reset();
    file_id_.reset();
    std::remove(tmp_.c_str());
  }

  void add_sequence(const int64_t* tokens, int64_t count) override {
    check_open("add_sequence");
    if (count < 0 || count > std::numeric_limits<int32_t>::max()) {
      throw std::invalid_argument(file_ + ": sequence of " + std::to_string(count) +
                                  " tokens (lengths are stored as int32, as in Megatron's .idx)");
    }
    narrow_tokens(dtype_, tokens, count, pending_, file_);
    lengths_.push_back(static_cast<int32_t>(count));
    if (pending_.size() >= kChunkTokens * dtype_size(dtype_)) flush_tokens();
  }

  void end_document() override {
    check_open("end_document");
    document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
  }

  void finalize() override {
    check_open("finalize");
    if (document_indices_.back() != static_cast<int64_t>(lengths_.size())) {
      throw std::logic_error(file_ + ": sequences added after the last end_document(); end the document first");
    }
    flush_tokens();
    {
      Hdf5Guard guard;
      write_vector("sequence_lengths", H5T_STD_I32LE, H5T_NATIVE_INT32, lengths_.data(), lengths_.size());
      write_vector("document_indices", H5T_STD_I64LE, H5T_NATIVE_INT64, document_indices_.data(),
                   document_indices_.size());
      tokens_.reset();
      check(H5Fflush(file_id_.get(), H5F_SCOPE_GLOBAL), tmp_, "H5Fflush");
      check(H5Fclose(file_id_.release()), tmp_, "H5Fclose");
    }
    if (std::rename(tmp_.c_str(), file_.c_str()) != 0) {
      throw std::runtime_error("cannot rename " + tmp_ + " to " + file_);
    }
    finalized_ = true;
  }

 private:
  // Creates FILE.tmp with an empty, extendable /tokens.
  void create() {
    Hdf5Guard guard;
    file_id_ = Handle(H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (file_id_.get() < 0) throw std::runtime_error(tmp_ + ": cannot create HDF5 file");
    const hsize_t zero = 0, unlimited = H5S_UNLIMITED;
    Handle space = checked(H5Screate_simple(1, &zero, &unlimited), H5Sclose, tmp_, "H5Screate_simple");
    Handle properties = checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, tmp_, "H5Pcreate");
    check(H5Pset_chunk(properties.get(), 1, &kChunkTokens), tmp_, "H5Pset_chunk");
    tokens_ = checked(H5Dcreate2(file_id_.get(), "tokens", file_type(dtype_), space.get(), H5P_DEFAULT,
                                 properties.get(), H5P_DEFAULT),
                      H5Dclose, tmp_, "H5Dcreate2 (tokens)");
  }

  void check_open(const char* what) const {
    if (finalized_) throw std::logic_error(file_ + ": " + what + "() after finalize()");
  }

  // Appends the pending tokens to /tokens: extend, select the new tail, write.
  void flush_tokens() {
    const hsize_t n = pending_.size() / dtype_size(dtype_);
    if (n == 0) return;
    Hdf5Guard guard;
    const hsize_t extent = written_ + n;
    check(H5Dset_extent(tokens_.get(), &extent), tmp_, "H5Dset_extent");
    const TokenRange range(tokens_, written_, n, tmp_);
    check(H5Dwrite(tokens_.get(), memory_type(dtype_), range.memory.get(), range.file.get(), H5P_DEFAULT, pending_.data()),
          tmp_, "H5Dwrite (tokens)");
    written_ = extent;
    pending_.clear();
  }

  // Writes a whole 1-D dataset `name` (caller holds the HDF5 lock).
  void write_vector(const char* name, hid_t type, hid_t native, const void* data, size_t length) {
    const auto n = static_cast<hsize_t>(length);
    Handle space = checked(H5Screate_simple(1, &n, nullptr), H5Sclose, tmp_, "H5Screate_simple");
    Handle dataset = checked(
        H5Dcreate2(file_id_.get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
        tmp_, "H5Dcreate2");
    if (n > 0) check(H5Dwrite(dataset.get(), native, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), tmp_, "H5Dwrite");
  }

  std::string file_;
  std::string tmp_;                            // FILE.tmp until finalize()
  TokenDtype dtype_;
  Handle file_id_;
  Handle tokens_;                              // /tokens, extendable, chunked
  hsize_t written_ = 0;                        // tokens already in /tokens
  std::vector<unsigned char> pending_;         // tokens not yet written, in the dtype
  std::vector<int32_t> lengths_;               // [sequences]
  std::vector<int64_t> document_indices_{0};   // [documents + 1]
  bool finalized_ = false;
};

}  // namespace

std::unique_ptr<TokenDataset> open_hdf5_dataset(const std::string& file) {
  return std::make_unique<Hdf5TokenDataset>(file);
}

std::unique_ptr<TokenDatasetWriter> create_hdf5_writer(const std::string& file, TokenDtype dtype) {
  return std::make_unique<Hdf5TokenWriter>(file, dtype);
}

}  // namespace megacpp::io::data::detail
