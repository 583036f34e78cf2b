#include "rl/exact_answer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "io/data/tokenizer/tokenizer.h"
#include "megacpp/text.h"

namespace megacpp::rl {
RewardFunction exact_answer_reward(const std::vector<PromptExample>& examples, const io::data::Tokenizer& tokenizer,
                                   const std::vector<int64_t>& stop) {
  auto answers = std::make_shared<std::map<std::vector<int64_t>, std::string>>();
  for (const auto& e : examples) (*answers)[e.ids] = trimmed(e.answer);
  return [answers, &tokenizer, stop](const std::vector<int64_t>& prompt, const std::vector<int64_t>& response) {
    const auto found = answers->find(prompt);
    if (found == answers->end()) throw std::invalid_argument("no answer is known for this prompt");
    std::vector<int64_t> text = response;
    if (!text.empty() && std::find(stop.begin(), stop.end(), text.back()) != stop.end()) text.pop_back();
    return trimmed(tokenizer.detokenize(text)) == found->second ? 1.0 : 0.0;
  };
}

}  // namespace megacpp::rl
