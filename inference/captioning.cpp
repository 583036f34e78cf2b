#include "inference/captioning.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "inference/greedy_decoding.h"

namespace megacpp::inference {
namespace {

// The images of records [begin, end), [n, channels, size, size].
at::Tensor images_of(const std::vector<io::data::ImageTextRecord>& records, size_t begin, size_t end, const io::data::ImageTextFormat& format) {
  std::vector<float> pixels;
  for (size_t i = begin; i < end; ++i) {
    const std::vector<float> image = io::data::record_pixels(records[i], format.processing);
    pixels.insert(pixels.end(), image.begin(), image.end());
  }
  const int64_t size = format.processing.size;
  return torch::from_blob(pixels.data(), {static_cast<int64_t>(end - begin), format.processing.channels, size, size}, torch::kFloat).clone();
}

}  // namespace

CaptionScore score_captions(models::LanguageModel& model, const std::vector<io::data::ImageTextRecord>& records,
                            const io::data::Tokenizer& tokenizer, const io::data::ImageTextFormat& format, int64_t max_length,
                            int64_t batch_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  CaptionScore score;
  for (size_t begin = 0; begin < records.size();) {
    size_t end = begin + 1;
    while (end < records.size() && end - begin < static_cast<size_t>(batch_size) && records[end].prompt.size() == records[begin].prompt.size()) ++end;
    const int64_t prefix = format.tokens_per_image + static_cast<int64_t>(records[begin].prompt.size());
    at::Tensor ids = torch::full({static_cast<int64_t>(end - begin), prefix}, format.image_token_id, torch::kLong);
    for (size_t i = begin; i < end; ++i) {
      const auto& prompt = records[i].prompt;
      for (size_t t = 0; t < prompt.size(); ++t) ids[static_cast<int64_t>(i - begin)][format.tokens_per_image + static_cast<int64_t>(t)] = prompt[t];
    }
    GreedyDecoding how;
    how.vocabulary = tokenizer.vocab_size();
    how.banned = {format.image_token_id};
    how.stop = {tokenizer.eod()};
    how.max_length = max_length;
    const auto generated = continue_greedily(model, ids, images_of(records, begin, end, format), how);
    for (size_t i = begin; i < end; ++i) {
      std::vector<int64_t> reference(records[i].text.begin(), records[i].text.end() - 1);  // without the end of document
      Caption c{tokenizer.detokenize(generated[i - begin]), tokenizer.detokenize(reference), records[i].where};
      score.correct += c.generated == c.reference ? 1 : 0;
      score.captions.push_back(std::move(c));
    }
    score.images += static_cast<int64_t>(end - begin);
    begin = end;
  }
  return score;
}

}  // namespace megacpp::inference
