// Image-text data for a vision-language model: JSON lines, one sample each,
//
//   {"image": "images/00001.png", "text": "a photo of a bag"}
//   {"image": "cat.jpg", "prompt": "What is this?", "text": "A cat."}
//
// (the image path relative to the file; "prompt" optional). A sample's tokens are the image
// placeholder tokens (one per image feature), the prompt's, the text's and the end-of-document
// token, padded with it to the sample length; only the text and its end-of-document token are
// scored, as LLaVA masks the image and the prompt with -100. Images are decoded when a sample is
// read (image_loader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "megacpp/data/image_loader.h"
#include "megacpp/data/sample_source.h"
#include "megacpp/data/tokenizer/tokenizer.h"

namespace megacpp::data {

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
  std::vector<int64_t> prompt;      // not scored
  std::vector<int64_t> text;        // scored, with the end-of-document token
  std::string where;                // "FILE:LINE", for errors
};

// Every line of `path` (blank lines skipped). Throws std::invalid_argument naming FILE:LINE for
// a line that is not a JSON object, lacks "image" or "text" (strings; the text not empty), names
// an image that does not exist, has a text whose tokens hold the image token id, or whose image
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

}  // namespace megacpp::data
