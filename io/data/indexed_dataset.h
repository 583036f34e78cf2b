// Token datasets on disk, read without copying: Megatron-LM's indexed dataset
// (PREFIX.bin + PREFIX.idx, "MMIDIDX" version 1, memory-mapped) and the same data in an
// HDF5 file (a token array plus sequence offsets), chosen by file name.
//
// As in Megatron, the unit is a *sequence* (one entry of the index; preprocess writes one
// per document) and `document_indices` marks where documents start, in sequences.
//
// PREFIX.idx, little-endian, exactly as megatron/core/datasets/indexed_dataset.py's
// _IndexWriter writes it:
//   char     magic[9] = "MMIDIDX\0\0"
//   uint64   version = 1
//   uint8    dtype code (TokenDtype)
//   uint64   sequence_count                      (N)
//   uint64   document_count                      (D = len(document_indices) = documents + 1)
//   int32    sequence_lengths[N]                 tokens per sequence
//   int64    sequence_pointers[N]                byte offset of each sequence in PREFIX.bin
//   int64    document_indices[D]                 0, then the sequence count after each document
// Megatron's multimodal variant appends int8 sequence_modes[N]; it is refused on open.
// PREFIX.bin holds the tokens, in the dtype, at those offsets.
//
// FILE.h5 / FILE.hdf5 (megacpp's own layout, the same content):
//   /tokens            1-D, all sequences back to back; its HDF5 integer/float type is the dtype
//                      (uint8/int8/int16/uint16/int32/int64/float32/float64, little-endian)
//   /sequence_lengths  1-D int32 or int64 [N]; sequence i starts at sum(lengths[:i]) in /tokens
//   /document_indices  1-D int64 [D], as in the .idx
// and sum(sequence_lengths) == size(/tokens). Written chunked (extendable), read by hyperslab.
//
// Validation on open (std::runtime_error naming the file): missing file, bad magic,
// unsupported version, unknown dtype, truncated or oversized index, a sequence beyond the
// end of the tokens, document_indices not starting at 0, decreasing, or not ending at N.
// NOTE: document_indices may repeat a value (a document with no sequences): Megatron's
// current preprocess_data.py records empty documents that way, so it is accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megacpp::io::data {

// Megatron's dtype codes in the .idx header.
enum class TokenDtype : uint8_t {
  kUInt8 = 1, kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5, kFloat64 = 6, kFloat32 = 7, kUInt16 = 8,
};
// Bytes per token. Throws std::invalid_argument for a value outside the enum.
size_t dtype_size(TokenDtype dtype);
// NumPy's name of the dtype ("uint16", ...), for messages; "unknown" outside the enum.
const char* dtype_name(TokenDtype dtype);
// The smallest dtype Megatron picks for a vocabulary: uint16 below 65500 tokens, else int32.
TokenDtype dtype_for_vocab_size(int64_t vocab_size);

// Reads are const and safe to call from several threads at once.
class TokenDataset {
 public:
  virtual ~TokenDataset() = default;
  virtual int64_t num_sequences() const = 0;
  virtual int64_t sequence_length(int64_t sequence) const = 0;
  // Copies tokens [offset, offset + count) of `sequence` into `out`, widened to int64.
  // Throws std::out_of_range (naming the file) for a range outside the sequence.
  virtual void read(int64_t sequence, int64_t offset, int64_t count, int64_t* out) const = 0;
  // Sequence numbers where documents start, then num_sequences() (Megatron's document_indices).
  virtual const std::vector<int64_t>& document_indices() const = 0;
  virtual TokenDtype dtype() const = 0;
  // The path(s) it was opened from, for messages.
  virtual const std::string& path() const = 0;
  // Sum of the sequence lengths (computed once on open).
  int64_t num_tokens() const;

 protected:
  int64_t num_tokens_ = 0;
};

// Opens PATH.h5 / PATH.hdf5 as HDF5, anything else as the Megatron prefix PATH(.bin/.idx).
// Throws std::runtime_error naming the file for a missing, truncated or malformed dataset.
std::unique_ptr<TokenDataset> open_token_dataset(const std::string& path);

// Writes a dataset sequence by sequence, as Megatron's IndexedDatasetBuilder does.
// Data goes to temporary files (PREFIX.bin.tmp / PREFIX.idx.tmp, FILE.h5.tmp) renamed into
// place by finalize(); a writer destroyed before finalize() removes them, so an interrupted
// run never leaves a dataset that looks complete. Not thread-safe: one thread owns a writer.
class TokenDatasetWriter {
 public:
  virtual ~TokenDatasetWriter() = default;
  // Throws std::out_of_range naming the file for a token the dtype cannot hold.
  virtual void add_sequence(const int64_t* tokens, int64_t count) = 0;
  // Marks the end of a document (after its sequences).
  virtual void end_document() = 0;
  // Writes the index / closes the file. Nothing is readable before this.
  virtual void finalize() = 0;
};

// `path` as for open_token_dataset: an .h5/.hdf5 file name or a Megatron prefix.
// Throws std::runtime_error naming the file when it cannot be created.
std::unique_ptr<TokenDatasetWriter> create_token_dataset(const std::string& path, TokenDtype dtype);

// Whether open_token_dataset / create_token_dataset treat `path` as HDF5 (.h5 / .hdf5).
bool is_hdf5_path(const std::string& path);

}  // namespace megacpp::io::data
