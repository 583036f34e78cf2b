// Greedy answers to held-out conversations by a language model, and how often the answer is
// the reference one (the held-out exact-answer accuracy scripts/sft_demo.sh reports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/data/chat_template.h"
#include "io/data/tokenizer/tokenizer.h"
#include "models/language_model.h"

namespace megacpp::inference {

struct Question {
  std::vector<int64_t> prompt;  // the conversation before its last message, with the generation prompt
  std::string reference, where;  // the last (assistant's) message; FILE:LINE
};

// Each JSON line of `path` in an instruction handler's format (--handler-name, --map-keys: Note
// [Instruction data]): the conversation up to its last message, which must be the assistant's,
// rendered by `chat` with the generation prompt and tokenized as training data is; the
// reference is that message. Throws std::invalid_argument naming FILE:LINE.
std::vector<Question> read_questions(const std::string& path, const std::string& handler, const nlohmann::json& map_keys,
                                     const io::data::ChatTemplate& chat, const io::data::Tokenizer& tokenizer);

// What ends an answer: the text the template writes after an assistant's message (its end of
// turn: "<|im_end|>" in ChatML), trimmed; "" when it writes nothing there.
std::string end_of_turn(const io::data::ChatTemplate& chat);

struct Answer {
  std::string generated, reference, where;
};

struct AnswerScore {
  int64_t questions = 0;
  int64_t correct = 0;  // generated == reference, both trimmed of white space
  std::vector<Answer> answers;
  double accuracy() const { return questions > 0 ? static_cast<double>(correct) / static_cast<double>(questions) : 0.0; }
};

// Greedy answers, `batch_size` questions of one prompt length together, each until the
// tokenizer's end of document, `end_of_turn`, `max_new_tokens` tokens or `max_positions` in all
// (the model's; 0: no limit; a prompt that fills them gets no answer). The answer is the text
// before `end_of_turn`. Greedy generation (Note [Generation]), with a KV cache where the model
// keeps one, so that an answer is the same whatever batch it is in.
AnswerScore score_answers(models::LanguageModel& model, const std::vector<Question>& questions, const io::data::Tokenizer& tokenizer,
                          const std::string& end_of_turn, int64_t max_new_tokens, int64_t batch_size, int64_t max_positions = 0);

}  // namespace megacpp::inference
