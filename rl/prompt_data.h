// Prompts with verifiable answers, as ROLL's RLVR data and verl's GSM8K files hold them: JSON
// lines {"prompt": "12+7=", "answer": "19"}, the prompt tokenized as the policy reads it (no
// end-of-document appended), the answer kept as text for the exact-answer reward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megacpp::io::data {
class Tokenizer;
}

namespace megacpp::rl {

struct PromptExample {
  std::vector<int64_t> ids;
  std::string answer;
};

// Every line of `path` (given by `flag`; blank lines skipped). Throws std::invalid_argument naming
// the flag, file and line for a line that is not such an object, an empty prompt, or one of
// `max_tokens` tokens or more (it would leave no room to answer; ROLL's prompt_length), and for a
// file without prompts.
std::vector<PromptExample> read_prompts(const std::string& path, const std::string& flag, const io::data::Tokenizer& tokenizer,
                                        int64_t max_tokens);

}  // namespace megacpp::rl
