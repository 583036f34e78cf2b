// The verifiable reward of math RLVR (verl's GSM8K score, ROLL's math rule reward at its
// simplest): 1 when the response, read as text up to its stop token, is the prompt's answer
// (both trimmed of surrounding whitespace), else 0.
#pragma once

#include <cstdint>
#include <vector>

#include "rl/grpo_step.h"
#include "rl/prompt_data.h"

namespace megacpp::rl {

// The reward of the prompts of `examples` (a prompt it does not hold is an error naming it);
// `stop` are the tokens that end a response (dropped before reading it). The tokenizer must
// outlive the function.
RewardFunction exact_answer_reward(const std::vector<PromptExample>& examples, const io::data::Tokenizer& tokenizer,
                                   const std::vector<int64_t>& stop);

}  // namespace megacpp::rl
