#include "inference/captioning.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>


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

// Greedy continuations of `prefix` [n, length] until every row has ended or `max_length`. Only
// the tokenizer's ids compete (not the padded vocabulary's rest, nor the image token, which
// would ask for another image); a row that has ended goes on with end-of-document tokens.
std::vector<std::vector<int64_t>> continue_greedily(models::LanguageModel& model, at::Tensor ids, const at::Tensor& images,
                                                    const io::data::Tokenizer& tokenizer, int64_t image_token_id, int64_t max_length) {
  const int64_t rows = ids.size(0), eod = tokenizer.eod();
  std::vector<std::vector<int64_t>> generated(static_cast<size_t>(rows));
  std::vector<bool> ended(static_cast<size_t>(rows), false);
  while (ids.size(1) < max_length && std::find(ended.begin(), ended.end(), false) != ended.end()) {
    at::Tensor logits = model(parallel::Module::Tensors{ids, images})[0].select(1, ids.size(1) - 1).to(torch::kFloat);
    logits.narrow(1, tokenizer.vocab_size(), logits.size(1) - tokenizer.vocab_size()).fill_(-INFINITY);
    if (image_token_id < tokenizer.vocab_size()) logits.select(1, image_token_id).fill_(-INFINITY);
    at::Tensor next = logits.argmax(-1);
    for (int64_t r = 0; r < rows; ++r) {
      if (ended[r]) {
        next[r] = eod;
        continue;
      }
      const int64_t token = next[r].item<int64_t>();
      if (token == eod) {
        ended[r] = true;
      } else {
        generated[r].push_back(token);
      }
    }
    ids = torch::cat({ids, next.unsqueeze(1)}, 1);
  }
  return generated;
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
    const auto generated = continue_greedily(model, ids, images_of(records, begin, end, format), tokenizer, format.image_token_id, max_length);
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
