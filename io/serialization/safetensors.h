// Torch-free reader and writer of Hugging Face safetensors files, and of the sharded
// checkpoints (model-00001-of-0000N.safetensors + model.safetensors.index.json) that
// transformers' save_pretrained writes. First building block of HF import/export.
//
// File format (huggingface/safetensors, safetensors/src/tensor.rs):
//   [u64 little-endian N][N bytes of UTF-8 JSON header][byte buffer]
//   header = {"__metadata__": {str: str} (optional),
//             "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   Offsets are relative to the start of the byte buffer; tensors are C-order, little endian.
//
// What the reference writer (Rust `prepare`, used by Python's safetensors.torch.save_file)
// does, and write_safetensors does identically so the files are byte for byte the same:
//   * tensors are laid out in DESCENDING order of the Dtype enum (the enum is declared in
//     increasing alignment order: BOOL < F4 < F6_E2M3 < F6_E3M2 < U8 < I8 < F8_E5M2 <
//     F8_E4M3 < F8_E8M0 < F8_E4M3FNUZ < F8_E5M2FNUZ < I16 < U16 < F16 < BF16 < I32 < U32 <
//     F32 < C64 < F64 < I64 < U64), ties broken by name in ascending byte order;
//     offsets are contiguous from 0 with no padding between tensors;
//   * the header is compact JSON (serde_json::to_string: no spaces), "__metadata__" first
//     (only when metadata is given), then the tensors in layout order, each entry's keys in
//     the order dtype, shape, data_offsets; strings escape only '"', '\\' and control
//     characters (\b \f \n \r \t, others \u00xx), non-ASCII is written as raw UTF-8;
//   * the header is padded with spaces to a multiple of 8 bytes, so the buffer starts
//     8-byte aligned.
//   The one thing the reference leaves undefined is the order of several "__metadata__"
//   keys (a Rust HashMap); we write them sorted by key. With zero or one key (transformers
//   writes {"format": "pt"}) the bytes are identical.
//
// What the reference reader (SafeTensors::read_metadata / Metadata::validate) accepts, and
// SafetensorsFile::open accepts no more: file >= 8 bytes, N <= 100,000,000, 8 + N <= file
// size, header valid UTF-8 JSON object starting with '{', every tensor entry has a known
// dtype, a shape of non-negative integers and two data_offsets; sorted by offsets the
// tensors tile the buffer exactly (each begins where the previous ended: no overlap, no
// hole), end - begin == product(shape) * dtype size, and the last end is the buffer's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace megacpp::io::serialization {

// --- dtypes -------------------------------------------------------------------------------

// True for the dtype names the reference Dtype enum knows ("F32", "BF16", "I64", ...).
bool is_safetensors_dtype(const std::string& dtype);
// Bits per element (4 for F4, 6 for F6_*, 8 for BOOL/U8/I8/F8_*, 64 for C64, ...).
// Throws std::invalid_argument for an unknown dtype.
int dtype_bits(const std::string& dtype);
// Position in the reference enum (increasing alignment); the writer lays tensors out by
// decreasing rank. Throws std::invalid_argument for an unknown dtype.
int dtype_rank(const std::string& dtype);
// Bytes a tensor of this dtype and shape occupies: product(shape) * bits / 8 (1 element for
// a 0-d shape). Throws std::invalid_argument for an unknown dtype, a negative dimension, a
// size that overflows, or a bit count that is not a whole number of bytes.
uint64_t tensor_nbytes(const std::string& dtype, const std::vector<int64_t>& shape);

// --- tensors ------------------------------------------------------------------------------

// A non-owning tensor: dtype name, shape, and the `nbytes` raw little-endian bytes at `data`.
struct TensorView {
  std::string dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  std::size_t nbytes = 0;

  int64_t numel() const;
};

// An owning tensor, for tensors built in memory (conversions, tests).
struct Tensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  TensorView view() const { return TensorView{dtype, shape, data.data(), data.size()}; }
};

using SafetensorsMetadata = std::map<std::string, std::string>;

// --- reading ------------------------------------------------------------------------------

// A memory-mapped, validated safetensors file. Views returned by tensor() point into the
// mapping and stay valid while this object (or a moved-to object) lives. Movable, not
// copyable; safe to read from several threads.
class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws std::runtime_error naming the file (and the tensor,
  // where one is at fault) when it cannot be opened or is not a valid safetensors file.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensor names in ascending name order.
  std::vector<std::string> names() const;
  // Tensor names in the order their bytes appear in the file (increasing data_offsets).
  std::vector<std::string> names_in_file_order() const;
  std::size_t size() const { return entries_.size(); }
  bool contains(const std::string& name) const;
  // Throws std::runtime_error naming the file and the tensor when there is no such tensor.
  TensorView tensor(const std::string& name) const;
  // data_offsets of a tensor, relative to the start of the byte buffer.
  std::pair<uint64_t, uint64_t> data_offsets(const std::string& name) const;

  // "__metadata__" (empty when absent; has_metadata() tells the two apart).
  const SafetensorsMetadata& metadata() const { return metadata_; }
  bool has_metadata() const { return has_metadata_; }

  uint64_t header_size() const { return header_size_; }      // N
  uint64_t data_start() const { return 8 + header_size_; }   // file offset of the buffer
  uint64_t file_size() const { return file_size_; }

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0;
    uint64_t end = 0;
  };
  struct Mapping;
  SafetensorsFile() = default;

  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  std::map<std::string, Entry> entries_;
  std::vector<std::string> file_order_;
  SafetensorsMetadata metadata_;
  bool has_metadata_ = false;
  uint64_t header_size_ = 0;
  uint64_t file_size_ = 0;
};

// --- writing ------------------------------------------------------------------------------

// The order the reference writer lays these tensors out in (see the top of this file).
// Throws std::invalid_argument for an unknown dtype.
std::vector<std::string> safetensors_layout_order(const std::map<std::string, TensorView>& tensors);

// The whole file as bytes, exactly as the reference serializer would produce it.
// `metadata` absent: no "__metadata__" key (save_file(..., metadata=None)); present, even
// empty: written. Throws std::invalid_argument for a bad tensor (unknown dtype, negative
// dimension, nbytes != product(shape) * dtype size, null data with nbytes > 0, a name that
// is not valid UTF-8 or is "__metadata__") or a header over 100,000,000 bytes.
std::vector<uint8_t> serialize_safetensors(const std::map<std::string, TensorView>& tensors,
                                           const std::optional<SafetensorsMetadata>& metadata = std::nullopt);

// Writes the same bytes to `path` + ".tmp", fsyncs it and renames it onto `path`, so
// readers never see a partial file. Validates like serialize_safetensors (before creating
// anything); throws std::runtime_error naming the file on I/O errors.
void write_safetensors(const std::string& path, const std::map<std::string, TensorView>& tensors,
                       const std::optional<SafetensorsMetadata>& metadata = std::nullopt);
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::optional<SafetensorsMetadata>& metadata = std::nullopt);

// --- sharded checkpoints ------------------------------------------------------------------

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr const char* kSafetensorsSingleName = "model.safetensors";

// How huggingface_hub's split_state_dict_into_shards_factory (used by transformers'
// save_pretrained) splits tensors, given in state-dict order: walking them in order, a
// tensor larger than max_shard_bytes gets a shard of its own (appended at once, so before
// the shard being filled); otherwise, when it would take the current shard over the limit,
// the current shard is closed and a new one started. Shard i of n (1-based) is named
// "model-%05d-of-%05d.safetensors"; a single shard is "model.safetensors" (and HF writes no
// index for it). total_size is the sum of all tensor sizes.
struct ShardPlan {
  std::vector<std::string> filenames;                 // in shard order
  std::vector<std::vector<std::string>> shards;       // tensor names per shard, input order
  std::map<std::string, std::string> weight_map;      // tensor name -> filename
  uint64_t total_size = 0;

  bool is_sharded() const { return filenames.size() > 1; }
};

// `tensors`: (name, nbytes) in state-dict order. Throws std::invalid_argument for a
// duplicate name or max_shard_bytes == 0.
ShardPlan plan_safetensors_shards(const std::vector<std::pair<std::string, uint64_t>>& tensors,
                                  uint64_t max_shard_bytes);

// model.safetensors.index.json: {"metadata": {"total_size": N, ...}, "weight_map": {name: file}}.
struct SafetensorsIndex {
  nlohmann::json metadata = nlohmann::json::object();  // holds "total_size" and anything else
  std::map<std::string, std::string> weight_map;

  // metadata["total_size"]; throws std::runtime_error when absent or not a non-negative integer.
  uint64_t total_size() const;
  // Shard file names, each once, in ascending order.
  std::vector<std::string> filenames() const;
};

// Reads and validates an index: a JSON object whose "weight_map" maps strings to strings
// and whose optional "metadata" is an object. Throws std::runtime_error naming the file.
SafetensorsIndex read_safetensors_index(const std::string& path);
// Writes it as transformers does: json.dumps(index, indent=2, sort_keys=True) + "\n"
// (ASCII, non-ASCII escaped as \uXXXX), via path.tmp + rename.
void write_safetensors_index(const std::string& path, const SafetensorsIndex& index);

// save_pretrained's file layout: plans shards over `tensors` (state-dict order), writes each
// shard with `metadata` (transformers passes {"format": "pt"}) into `directory` (created if
// needed) and, when there is more than one shard, model.safetensors.index.json. Returns the
// plan. Throws like write_safetensors; names must be unique.
ShardPlan save_safetensors_sharded(const std::string& directory,
                                   const std::vector<std::pair<std::string, TensorView>>& tensors,
                                   uint64_t max_shard_bytes,
                                   const std::optional<SafetensorsMetadata>& metadata =
                                       SafetensorsMetadata{{"format", "pt"}});

// A checkpoint directory read back: model.safetensors.index.json and its shards, or a lone
// model.safetensors. Opens (and so validates) every shard the weight map names and checks
// that each tensor is in the file the index names. As transformers' loader, it trusts the
// weight map: tensors a shard holds but the index does not list are not exposed, and
// total_size is informational (not checked). Throws std::runtime_error naming the file.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::string& directory);

  std::vector<std::string> names() const;  // ascending
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  TensorView tensor(const std::string& name) const;
  // The shard file name (relative to the directory) holding `name`.
  const std::string& filename_of(const std::string& name) const;
  const SafetensorsFile& file(const std::string& filename) const;
  std::vector<std::string> filenames() const;
  // The index (for a lone model.safetensors: one built from its contents).
  const SafetensorsIndex& index() const { return index_; }
  bool is_sharded() const { return sharded_; }

 private:
  std::string directory_;
  SafetensorsIndex index_;
  bool sharded_ = false;
  std::map<std::string, SafetensorsFile> files_;
  std::map<std::string, std::string> where_;
};

}  // namespace megacpp::io::serialization
