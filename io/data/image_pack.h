// megacpp-preprocess --pack-images: image-text JSON lines whose images are decoded, converted,
// resized and cropped once (on several threads) into PREFIX.pixels (packed_images.h), with
// PREFIX.jsonl: every line as it was, its "image" now {"pixels": "PREFIX.pixels's name",
// "index": N}. Training on PREFIX.jsonl gives the same batches as on the input, without decoding.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace megacpp::io::data {

struct ImagePackOptions {
  std::string input;          // --input: image-text JSON lines
  std::string output_prefix;  // --output-prefix
  int64_t size = 224;         // --img-h (= --img-w): the tower's square
  int64_t channels = 3;       // --num-channels
  int workers = 1;            // --workers: decoding threads
  int64_t log_interval = 1000;
};

struct ImagePackResult {
  int64_t images = 0;
  std::string jsonl, pixels;  // the files written
  double seconds = 0;
};

// Throws std::invalid_argument naming FILE:LINE for a line that is not a JSON object or whose
// "image" is not the path of an existing file, std::runtime_error naming FILE:LINE for an
// image that cannot be decoded. Progress lines go to `progress` (nullptr: silent).
ImagePackResult pack_images(const ImagePackOptions& options, std::ostream* progress);

}  // namespace megacpp::io::data
