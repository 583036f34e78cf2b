// Dtype helpers, shared validation, and the open/create dispatch by file name.
#include <string>

#include "io/data/indexed_dataset.h"
#include "io/data/token_dataset_internal.h"

namespace megacpp::io::data {

size_t dtype_size(TokenDtype dtype) {
  return detail::visit_dtype(dtype, [](auto zero) { return sizeof(zero); });
}

const char* dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUInt8: return "uint8";
    case TokenDtype::kInt8: return "int8";
    case TokenDtype::kInt16: return "int16";
    case TokenDtype::kInt32: return "int32";
    case TokenDtype::kInt64: return "int64";
    case TokenDtype::kFloat64: return "float64";
    case TokenDtype::kFloat32: return "float32";
    case TokenDtype::kUInt16: return "uint16";
  }
  return "unknown";
}

// Megatron's DType.optimal_dtype (the name says cardinality; preprocess passes the vocabulary).
TokenDtype dtype_for_vocab_size(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::kUInt16 : TokenDtype::kInt32;
}

int64_t TokenDataset::num_tokens() const { return num_tokens_; }

bool is_hdf5_path(const std::string& path) {
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".h5") || ends_with(".hdf5");
}

std::unique_ptr<TokenDataset> open_token_dataset(const std::string& path) {
  return is_hdf5_path(path) ? detail::open_hdf5_dataset(path) : detail::open_mmap_dataset(path);
}

std::unique_ptr<TokenDatasetWriter> create_token_dataset(const std::string& path, TokenDtype dtype) {
  dtype_size(dtype);  // rejects a value outside the enum before any file is created
  return is_hdf5_path(path) ? detail::create_hdf5_writer(path, dtype) : detail::create_mmap_writer(path, dtype);
}

namespace detail {

void validate_document_indices(const std::vector<int64_t>& document_indices, int64_t num_sequences,
                               const std::string& file) {
  if (document_indices.empty()) {
    throw std::runtime_error(file + ": document_indices is empty (it must start with 0 and end at the " +
                             "sequence count " + std::to_string(num_sequences) + ")");
  }
  if (document_indices.front() != 0) {
    throw std::runtime_error(file + ": document_indices[0] is " + std::to_string(document_indices.front()) +
                             ", expected 0");
  }
  for (size_t i = 1; i < document_indices.size(); ++i) {
    if (document_indices[i] < document_indices[i - 1]) {
      throw std::runtime_error(file + ": document_indices decreases at entry " + std::to_string(i) + " (" +
                               std::to_string(document_indices[i - 1]) + " then " +
                               std::to_string(document_indices[i]) + ")");
    }
  }
  if (document_indices.back() != num_sequences) {
    throw std::runtime_error(file + ": document_indices ends at " + std::to_string(document_indices.back()) +
                             ", expected the sequence count " + std::to_string(num_sequences));
  }
}

void check_read_range(int64_t sequence, int64_t num_sequences, int64_t offset, int64_t count,
                      int64_t length, const std::string& file) {
  if (sequence < 0 || sequence >= num_sequences) {
    throw std::out_of_range(file + ": sequence " + std::to_string(sequence) + " out of range [0, " +
                            std::to_string(num_sequences) + ")");
  }
  if (offset < 0 || count < 0 || offset > length - count) {
    throw std::out_of_range(file + ": tokens [" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
                            std::to_string(count) + ") outside sequence " + std::to_string(sequence) +
                            " of length " + std::to_string(length));
  }
}

}  // namespace detail
}  // namespace megacpp::io::data
