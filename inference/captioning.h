// Greedy captioning of images by a vision-language model, and how often the caption is the
// reference one (the held-out accuracy scripts/vl_demo.sh reports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/data/image_text_dataset.h"
#include "io/data/tokenizer/tokenizer.h"
#include "models/language_model.h"

namespace megacpp::inference {

struct Caption {
  std::string generated, reference, where;
};

struct CaptionScore {
  int64_t images = 0;
  int64_t correct = 0;  // generated == reference
  std::vector<Caption> captions;
  double accuracy() const { return images > 0 ? static_cast<double>(correct) / static_cast<double>(images) : 0.0; }
};

// For each record: its image tokens and prompt, then the most likely next token again and again
// (greedy) until the end-of-document token or `max_length` tokens in all. `batch_size` records
// that share a prompt length run together. The model runs in eval mode without gradients.
CaptionScore score_captions(models::LanguageModel& model, const std::vector<io::data::ImageTextRecord>& records,
                            const io::data::Tokenizer& tokenizer, const io::data::ImageTextFormat& format, int64_t max_length,
                            int64_t batch_size);

}  // namespace megacpp::inference
