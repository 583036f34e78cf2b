// Image-text data for a vision-language model: JSON lines, one sample each,
//
//   {"image": "images/00001.png", "text": "a photo of a bag"}
//   {"image": "cat.jpg", "prompt": "What is this?", "text": "A cat."}
//   {"image": {"pixels": "train.pixels", "index": 17}, "text": "a photo of a bag"}
//
// (paths relative to the file; "prompt" optional; the last form points into images packed by
// megacpp-preprocess --pack-images, packed_images.h). A sample's tokens are the image
// placeholder tokens (one per image feature), the prompt's, the text's and the end-of-document
// token, padded with it to the sample length; only the text and its end-of-document token are
// scored, as LLaVA masks the image and the prompt with -100. Image files are decoded when a
// sample is read (image_loader.h); packed images are only normalized.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/data/image_loader.h"
#include "io/data/packed_images.h"
#include "io/data/sample_source.h"
#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

// What the model takes: its image placeholder token, how many it takes per image, and the
// images' size and normalization.
struct ImageTextFormat {
  int64_t image_token_id = 0;
  int64_t tokens_per_image = 0;
  ImageProcessing processing;
};

// One line, tokenized.
struct ImageTextRecord {
  std::string image;                // the file, its path resolved against the data file's folder
  std::shared_ptr<const PackedImages> packed;  // or the packed images holding it, at packed_index
  int64_t packed_index = -1;
  std::vector<int64_t> prompt;      // not scored
  std::vector<int64_t> text;        // scored, with the end-of-document token
  std::string where;                // "FILE:LINE", for errors
};

// Whether --data-path names image-text data: one path ending in .jsonl.
bool is_image_text_path(const std::vector<std::string>& data_path);

// The record's image, [channels, size, size], decoded or read from its pack and normalized.
// Errors name the record's FILE:LINE.
std::vector<float> record_pixels(const ImageTextRecord& record, const ImageProcessing& processing);

// Every line of `path` (blank lines skipped). Throws std::invalid_argument naming FILE:LINE for
// a line that is not a JSON object, lacks "image" or "text" (strings; the text not empty), names
// an image that does not exist (or packed images of another shape than `format`'s, or an index
// outside them), has a text whose tokens hold the image token id, or whose image
// and prompt leave no label to score in `sample_length` tokens.
std::vector<ImageTextRecord> read_image_text_file(const std::string& path, const Tokenizer& tokenizer, const ImageTextFormat& format,
                                                  int64_t sample_length);

class ImageTextDataset final : public SampleSource {
 public:
  // Records [first, first + count) of `records`, read in a new order on each pass (drawn from
  // `seed`), `size` samples in all.
  ImageTextDataset(std::shared_ptr<const std::vector<ImageTextRecord>> records, int64_t first, int64_t count, ImageTextFormat format,
                   int64_t sample_length, int64_t pad_id, uint64_t seed, int64_t size);

  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return sample_length_; }
  void sample(int64_t index, int64_t* out) const override;
  bool has_images() const override { return true; }
  std::vector<int64_t> image_shape() const override {
    return {format_.processing.channels, format_.processing.size, format_.processing.size};
  }
  // Decodes the sample's image; errors name its FILE:LINE.
  void sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const override;

 private:
  const ImageTextRecord& record(int64_t index) const;

  std::shared_ptr<const std::vector<ImageTextRecord>> records_;
  int64_t first_, count_;
  ImageTextFormat format_;
  int64_t sample_length_, pad_id_, size_;
  std::vector<int64_t> order_;  // the record of each sample, pass after pass
};

}  // namespace megacpp::io::data
