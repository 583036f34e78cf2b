// Images decoded once (megacpp-preprocess --pack-images): a file of 8-bit pixels, every image
// already resized and cropped to the tower's square, so training reads them without decoding.
//
//   "MCPIXEL1"  8 bytes
//   count, channels, height, width    4 little-endian uint64
//   count x [height, width, channels] uint8 (prepare_image's layout)
//
// Image-text JSON lines point into it with {"image": {"pixels": "FILE.pixels", "index": N}}.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "io/serialization/mapped_file_guard.h"

namespace megacpp::io::data {

class PackedImages {
 public:
  // Maps `path`; throws std::invalid_argument naming it for a file that is not such a file.
  explicit PackedImages(const std::string& path);
  ~PackedImages();
  PackedImages(const PackedImages&) = delete;
  PackedImages& operator=(const PackedImages&) = delete;

  const std::string& path() const { return path_; }
  int64_t count() const { return count_; }
  int64_t channels() const { return channels_; }
  int64_t size() const { return height_; }  // square: height == width
  // Image `index`'s pixels (count() > index >= 0), [size, size, channels]; safe from any thread.
  const uint8_t* image(int64_t index) const;

 private:
  void read_header();  // throws for a file whose header and size disagree

  std::string path_;
  int64_t count_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  const uint8_t* data_ = nullptr;
  size_t mapped_bytes_ = 0;
  void* mapping_ = nullptr;
  std::unique_ptr<serialization::MappedFileGuard> guard_;  // names this file if it shrinks under the mapping
};

// Writes images of one shape, in order, to PATH.tmp, renamed to PATH by finish() (a run cut
// short leaves no file that looks whole).
class PackedImagesWriter {
 public:
  PackedImagesWriter(const std::string& path, int64_t size, int64_t channels);
  void add(const std::vector<uint8_t>& prepared);  // [size, size, channels]
  // Writes the header's count and publishes the file; throws std::runtime_error on a write error.
  void finish();

 private:
  std::string path_;
  int64_t size_, channels_, count_ = 0;
  std::ofstream out_;
};

}  // namespace megacpp::io::data
