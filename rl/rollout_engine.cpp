#include "rl/rollout_engine.h"

#include <chrono>
#include <stdexcept>

#include <torch/torch.h>

#include "parallel/object_collectives.h"

namespace megacpp::rl {

const parallel::Group& model_parallel_group(const parallel::DeviceMesh& mesh) {
  return mesh.tp().size() > 1 ? mesh.tp() : mesh.cp();
}

Prompts repeat_each(const Prompts& prompts, int64_t times) {
  Prompts repeated;
  for (const auto& prompt : prompts) {
    for (int64_t k = 0; k < times; ++k) repeated.push_back(prompt);
  }
  return repeated;
}

std::vector<inference::Generation> ColocatedRollout::generate(const Prompts& prompts, int64_t responses_per_prompt,
                                                              const inference::Sampling& sampling) {
  if (prompts.empty()) return {};
  return inference::generate(model_, repeat_each(prompts, responses_per_prompt), sampling);
}

std::vector<inference::Generation> SyncOnlyRollout::generate(const Prompts& prompts, int64_t, const inference::Sampling&) {
  if (!prompts.empty()) throw std::logic_error("SyncOnlyRollout: this rank holds no rollout model to generate with");
  return {};
}

WeightSyncStats SyncOnlyRollout::sync(models::LanguageModel& actor) {
  const auto start = std::chrono::steady_clock::now();
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  for_each_rollout_weight(actor, stats, [](const std::string&, const at::Tensor&) {});
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

std::vector<inference::Generation> SharedByModelParallelGroup::generate(const Prompts& prompts, int64_t responses_per_prompt,
                                                                         const inference::Sampling& sampling) {
  const bool first = group_.rank == 0;
  const auto mine = inner_.generate(first ? prompts : Prompts{}, responses_per_prompt, sampling);  // collective for a remote rollout
  parallel::TokenLists sent;  // the first rank's: each response's tokens, then whether each stopped
  std::vector<int64_t> stopped;
  for (const auto& g : mine) {
    sent.push_back(g.tokens);
    stopped.push_back(g.stopped ? 1 : 0);
  }
  sent.push_back(stopped);
  const parallel::TokenLists got = parallel::all_gather_token_lists(group_, first ? sent : parallel::TokenLists{}, device_).front();
  std::vector<inference::Generation> responses(got.size() - 1);
  for (size_t i = 0; i < responses.size(); ++i) {
    responses[i].tokens = got[i];
    responses[i].stopped = got.back()[i] != 0;
  }
  return responses;
}

}  // namespace megacpp::rl
