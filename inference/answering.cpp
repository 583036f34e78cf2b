#include "inference/answering.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "inference/generation.h"
#include "io/data/instruction_data.h"
#include "megacpp/text.h"

namespace megacpp::inference {
namespace {

// The text before `end` (all of it when `end` is empty or absent).
std::string before(const std::string& text, const std::string& end) {
  const auto at = end.empty() ? std::string::npos : text.find(end);
  return at == std::string::npos ? text : text.substr(0, at);
}

}  // namespace

std::vector<Question> read_questions(const std::string& path, const std::string& handler, const nlohmann::json& map_keys,
                                     const io::data::ChatTemplate& chat, const io::data::Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--input " + path + ": cannot open");
  std::vector<Question> questions;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(where + ": not valid JSON: " + e.what());
    }
    io::data::jinja::Value messages = io::data::conversation_of(parsed, handler, map_keys, where);
    if (messages.empty() || messages.back().value("role", "") != "assistant") {
      throw std::invalid_argument(where + ": the conversation must end with the assistant's answer");
    }
    Question q{{}, messages.back().value("content", ""), where};
    messages.erase(messages.size() - 1);
    q.prompt = tokenizer.tokenize_without_added_specials(chat.render(messages, /*add_generation_prompt=*/true));
    questions.push_back(std::move(q));
  }
  if (questions.empty()) throw std::invalid_argument("--input " + path + ": no conversations");
  return questions;
}

std::string end_of_turn(const io::data::ChatTemplate& chat) {
  const std::string marker = "\x01answer\x01";
  const io::data::jinja::Value messages = io::data::jinja::Value::array(
      {io::data::jinja::Value{{"role", "user"}, {"content", "question"}}, io::data::jinja::Value{{"role", "assistant"}, {"content", marker}}});
  const std::string text = chat.render(messages, /*add_generation_prompt=*/false);
  const auto at = text.rfind(marker);
  return at == std::string::npos ? "" : trimmed(text.substr(at + marker.size()));
}

AnswerScore score_answers(models::LanguageModel& model, const std::vector<Question>& questions, const io::data::Tokenizer& tokenizer,
                          const std::string& end_of_turn, int64_t max_new_tokens, int64_t batch_size, int64_t max_positions) {
  Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = max_new_tokens;
  greedy.max_length = max_positions;
  greedy.stop = {tokenizer.eod()};
  greedy.vocabulary = tokenizer.vocab_size();
  greedy.kv_cache = model.takes_kv_cache();  // else each step reads the whole sequence again
  greedy.finished = [&](const std::vector<int64_t>& tokens) {
    return !end_of_turn.empty() && tokenizer.detokenize(tokens).find(end_of_turn) != std::string::npos;
  };
  // Shortest prompts first, so that a batch pads little; the answers in the questions' order. A
  // prompt that fills the model's positions gets no answer.
  std::vector<size_t> order;
  for (size_t i = 0; i < questions.size(); ++i) {
    if (max_positions <= 0 || static_cast<int64_t>(questions[i].prompt.size()) < max_positions) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return questions[a].prompt.size() < questions[b].prompt.size(); });
  const bool pad = model.takes_packed_documents();  // else a batch is of prompts of one length
  std::vector<std::vector<int64_t>> generated(questions.size());
  for (size_t begin = 0; begin < order.size();) {
    const size_t length = questions[order[begin]].prompt.size();
    size_t end = begin + 1;
    while (end < order.size() && end - begin < static_cast<size_t>(batch_size) && (pad || questions[order[end]].prompt.size() == length)) ++end;
    std::vector<std::vector<int64_t>> prompts;
    for (size_t i = begin; i < end; ++i) prompts.push_back(questions[order[i]].prompt);
    auto rows = generate(model, prompts, greedy);
    for (size_t i = begin; i < end; ++i) {
      auto& tokens = rows[i - begin].tokens;
      if (!tokens.empty() && tokens.back() == tokenizer.eod()) tokens.pop_back();  // the stop token is no text
      generated[order[i]] = std::move(tokens);
    }
    begin = end;
  }
  AnswerScore score;
  for (size_t i = 0; i < questions.size(); ++i) {
    Answer a{trimmed(before(tokenizer.detokenize(generated[i]), end_of_turn)), trimmed(questions[i].reference), questions[i].where};
    score.correct += a.generated == a.reference ? 1 : 0;
    score.answers.push_back(std::move(a));
  }
  score.questions = static_cast<int64_t>(questions.size());
  return score;
}

}  // namespace megacpp::inference
