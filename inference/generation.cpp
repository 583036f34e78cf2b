#include "inference/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "models/layers/kv_cache.h"

namespace megacpp::inference {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

void check(const models::LanguageModel& model, const std::vector<std::vector<int64_t>>& prompts, const Sampling& s) {
  auto refuse = [](const std::string& why) { throw std::invalid_argument("generation: " + why); };
  if (!(s.temperature >= 0)) refuse("the temperature must be >= 0 (0: greedy), got " + std::to_string(s.temperature));
  if (!(s.top_p > 0 && s.top_p <= 1)) refuse("top_p must be in (0, 1], got " + std::to_string(s.top_p));
  if (s.max_new_tokens <= 0) refuse("max_new_tokens must be positive, got " + std::to_string(s.max_new_tokens));
  if (s.kv_cache && !model.takes_kv_cache()) {
    refuse("the " + model.name() + " model keeps no KV cache (LanguageModel::takes_kv_cache); generate without one");
  }
  size_t shortest = SIZE_MAX, longest = 0;
  for (size_t r = 0; r < prompts.size(); ++r) {
    shortest = std::min(shortest, prompts[r].size());
    longest = std::max(longest, prompts[r].size());
    if (prompts[r].empty()) refuse("prompt " + std::to_string(r) + " is empty");
    if (s.max_length > 0 && static_cast<int64_t>(prompts[r].size()) >= s.max_length) {
      refuse("prompt " + std::to_string(r) + " has " + std::to_string(prompts[r].size()) + " tokens: the context of " +
             std::to_string(s.max_length) + " leaves no room to generate");
    }
  }
  if (shortest != longest && !model.takes_packed_documents()) {
    refuse("prompts of several lengths need a model that takes documents (Note [Packed documents]); the " + model.name() +
           " model takes none: give prompts of one length");
  }
}

// The rows still generating: their prompt index, left padding, tokens read so far, and how many
// more they may generate.
struct Rows {
  std::vector<int64_t> prompt, padding, room;
  at::Tensor ids;  // [rows, read] left-padded: what the model has read (without a cache, what it reads again)

  void keep(const std::vector<int64_t>& kept) {
    const at::Tensor index = torch::tensor(kept, torch::kLong);
    ids = ids.index_select(0, index.to(ids.device()));
    auto pick = [&](std::vector<int64_t>& values) {
      std::vector<int64_t> picked;
      for (int64_t k : kept) picked.push_back(values[static_cast<size_t>(k)]);
      values = std::move(picked);
    };
    pick(prompt);
    pick(padding);
    pick(room);
  }
};

// Each row's left padding is a document of its own (0) before its prompt's (1); positions count
// from the prompt's first token. For the last `fresh` of the `read` columns.
std::pair<at::Tensor, at::Tensor> documents_and_positions(const std::vector<int64_t>& padding, int64_t read, int64_t fresh,
                                                          const c10::Device& device) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  const at::Tensor index = torch::arange(read - fresh, read, longs).unsqueeze(0);
  const at::Tensor pad = torch::tensor(padding, torch::kLong).to(device).unsqueeze(1);
  return {index.ge(pad).to(torch::kLong), (index - pad).clamp_min(0)};
}

// The logits [rows, vocab] after the last column of rows.ids; with a cache, reading only the
// last `fresh` columns.
at::Tensor next_logits(models::LanguageModel& model, const Rows& rows, models::KvCache* cache, int64_t fresh, bool padded) {
  const int64_t read = rows.ids.size(1);
  if (!cache && !padded) return model(rows.ids)[0].select(1, read - 1);
  if (!cache) fresh = read;
  auto [documents, positions] = documents_and_positions(rows.padding, read, fresh, rows.ids.device());
  if (cache) cache->append_documents(documents);
  const at::Tensor input = rows.ids.narrow(1, read - fresh, fresh);
  return model(parallel::Module::Tensors{input, at::Tensor(), positions, documents})[0].select(1, fresh - 1);
}

}  // namespace

at::Tensor sample_tokens(const at::Tensor& logits, const Sampling& s, at::Generator& generator) {
  at::Tensor z = logits.detach().to(torch::kCPU, torch::kFloat).clone();
  const int64_t vocab = z.size(1);
  if (z.isnan().any().item<bool>()) throw std::runtime_error("generation: the model's logits hold NaN");
  if (s.vocabulary > 0 && s.vocabulary < vocab) z.narrow(1, s.vocabulary, vocab - s.vocabulary).fill_(kMinusInfinity);
  if (s.temperature == 0) return z.argmax(-1);
  z.div_(s.temperature);
  if (s.top_k > 0 && s.top_k < vocab) {
    const at::Tensor kth = std::get<0>(z.topk(s.top_k, -1)).narrow(1, s.top_k - 1, 1);
    z.masked_fill_(z < kth, kMinusInfinity);
  }
  if (s.top_p < 1) {  // keep each token whose more likely ones sum to less than top_p
    const auto sorted = z.sort(-1, /*descending=*/true);
    const at::Tensor p = torch::softmax(std::get<0>(sorted), -1);
    const at::Tensor dropped = (p.cumsum(-1) - p).ge(s.top_p);
    z.masked_fill_(torch::zeros_like(dropped).scatter(1, std::get<1>(sorted), dropped), kMinusInfinity);
  }
  return at::multinomial(torch::softmax(z, -1), 1, /*replacement=*/false, generator).squeeze(1);
}

std::vector<Generation> generate(models::LanguageModel& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const Sampling& sampling) {
  check(model, prompts, sampling);
  std::vector<Generation> out(prompts.size());
  if (prompts.empty()) return out;
  const c10::Device device = model.parameters().front().device();
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  Rows rows;
  rows.ids = torch::zeros({static_cast<int64_t>(prompts.size()), static_cast<int64_t>(longest)}, torch::kLong);
  for (size_t r = 0; r < prompts.size(); ++r) {
    const auto n = static_cast<int64_t>(prompts[r].size());
    rows.ids[static_cast<int64_t>(r)].narrow(0, static_cast<int64_t>(longest) - n, n).copy_(torch::tensor(prompts[r], torch::kLong));
    rows.prompt.push_back(static_cast<int64_t>(r));
    rows.padding.push_back(static_cast<int64_t>(longest) - n);
    rows.room.push_back(sampling.max_length > 0 ? std::min(sampling.max_new_tokens, sampling.max_length - n) : sampling.max_new_tokens);
  }
  rows.ids = rows.ids.to(device);
  const bool padded = std::any_of(rows.padding.begin(), rows.padding.end(), [](int64_t p) { return p > 0; });
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(sampling.seed);
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  models::KvCache cache;
  std::optional<models::KvCacheScope> scope;
  if (sampling.kv_cache) scope.emplace(cache);
  int64_t fresh = rows.ids.size(1);  // the prompts first
  while (true) {
    const at::Tensor next = sample_tokens(next_logits(model, rows, scope ? &cache : nullptr, fresh, padded), sampling, generator);
    std::vector<int64_t> kept;
    for (size_t k = 0; k < rows.prompt.size(); ++k) {
      Generation& g = out[static_cast<size_t>(rows.prompt[k])];
      const int64_t token = next[static_cast<int64_t>(k)].item<int64_t>();
      g.tokens.push_back(token);
      g.stopped = std::find(sampling.stop.begin(), sampling.stop.end(), token) != sampling.stop.end() ||
                  (sampling.finished && sampling.finished(g.tokens));
      if (!g.stopped && static_cast<int64_t>(g.tokens.size()) < rows.room[k]) kept.push_back(static_cast<int64_t>(k));
    }
    at::Tensor appended = next.to(device).unsqueeze(1);
    if (kept.size() < rows.prompt.size()) {
      if (kept.empty()) break;
      const at::Tensor index = torch::tensor(kept, torch::kLong);
      rows.keep(kept);
      appended = appended.index_select(0, index.to(device));
      if (scope) cache.keep_rows(index);
    }
    rows.ids = torch::cat({rows.ids, appended}, 1);
    fresh = 1;
  }
  scope.reset();
  model.train(was_training);
  return out;
}

}  // namespace megacpp::inference
