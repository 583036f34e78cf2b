#include "rl/rollout_engine.h"

namespace megacpp::rl {

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

}  // namespace megacpp::rl
