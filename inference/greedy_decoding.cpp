#include "inference/greedy_decoding.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

namespace megacpp::inference {

namespace {

// The model's logits for `ids` [rows, length], each row's first left_padding[r] tokens a
// document of their own before the prompt's.
at::Tensor logits_of(models::LanguageModel& model, const at::Tensor& ids, const at::Tensor& extra, const std::vector<int64_t>& left_padding) {
  if (left_padding.empty()) return extra.defined() ? model(parallel::Module::Tensors{ids, extra})[0] : model(parallel::Module::Tensors{ids})[0];
  const at::Tensor index = torch::arange(ids.size(1), ids.options()).unsqueeze(0);
  const at::Tensor padding = torch::tensor(left_padding, ids.options()).unsqueeze(1);
  const at::Tensor documents = index.ge(padding).to(torch::kLong).expand_as(ids).contiguous();
  const at::Tensor positions = (index - padding).clamp_min(0).expand_as(ids).contiguous();
  return model(parallel::Module::Tensors{ids, extra, positions, documents})[0];
}

}  // namespace

std::vector<std::vector<int64_t>> continue_greedily(models::LanguageModel& model, at::Tensor ids, const at::Tensor& extra,
                                                    const GreedyDecoding& how, const std::vector<int64_t>& left_padding) {
  TORCH_CHECK(left_padding.empty() || (model.takes_packed_documents() && static_cast<int64_t>(left_padding.size()) == ids.size(0)),
              "greedy decoding: prompts of several lengths need a model that takes packed documents and one padding per row");
  std::vector<std::vector<int64_t>> generated(static_cast<size_t>(ids.size(0)));
  // The rows still running, in ids' order. Without an extra input an ended row leaves the batch;
  // with one (images, one per row or not) it stays, fed its stop token.
  std::vector<int64_t> running(generated.size()), padding = left_padding;
  for (size_t r = 0; r < running.size(); ++r) running[r] = static_cast<int64_t>(r);
  std::vector<int64_t> ended_with(generated.size(), -1);
  while (ids.size(1) < how.max_length && !running.empty()) {
    at::Tensor logits = logits_of(model, ids, extra, padding).select(1, ids.size(1) - 1).to(torch::kFloat);
    if (how.vocabulary < logits.size(1)) logits.narrow(1, how.vocabulary, logits.size(1) - how.vocabulary).fill_(-INFINITY);
    for (int64_t id : how.banned) {
      if (id < logits.size(1)) logits.select(1, id).fill_(-INFINITY);
    }
    at::Tensor next = logits.argmax(-1);
    std::vector<int64_t> kept;  // the places in ids of the rows that go on
    for (size_t k = 0; k < running.size(); ++k) {
      auto& stop = ended_with[static_cast<size_t>(running[k])];
      if (stop < 0) {
        const int64_t token = next[static_cast<int64_t>(k)].item<int64_t>();
        auto& row = generated[static_cast<size_t>(running[k])];
        if (std::find(how.stop.begin(), how.stop.end(), token) != how.stop.end()) {
          stop = token;
        } else {
          row.push_back(token);
          if (how.finished && how.finished(row)) stop = how.stop.empty() ? token : how.stop[0];
        }
      }
      if (stop >= 0) next[static_cast<int64_t>(k)] = stop;
      if (stop < 0 || extra.defined()) kept.push_back(static_cast<int64_t>(k));
    }
    if (kept.size() < running.size()) {
      const at::Tensor rows = torch::tensor(kept, torch::kLong);
      ids = ids.index_select(0, rows);
      next = next.index_select(0, rows);
      std::vector<int64_t> still, still_padding;
      for (int64_t k : kept) {
        still.push_back(running[static_cast<size_t>(k)]);
        if (!padding.empty()) still_padding.push_back(padding[static_cast<size_t>(k)]);
      }
      running = std::move(still);
      padding = std::move(still_padding);
    }
    if (running.empty()) break;
    if (extra.defined() && std::all_of(ended_with.begin(), ended_with.end(), [](int64_t s) { return s >= 0; })) break;
    ids = torch::cat({ids, next.unsqueeze(1)}, 1);
  }
  return generated;
}

}  // namespace megacpp::inference
