#include "inference/answering.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <torch/torch.h>

#include "inference/greedy_decoding.h"
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
  torch::NoGradGuard no_grad;
  model.eval();
  GreedyDecoding how;
  how.vocabulary = tokenizer.vocab_size();
  how.stop = {tokenizer.eod()};
  how.finished = [&](const std::vector<int64_t>& generated) {
    return !end_of_turn.empty() && tokenizer.detokenize(generated).find(end_of_turn) != std::string::npos;
  };
  // Shortest prompts first, so that a batch pads little; the answers in the questions' order.
  std::vector<size_t> order(questions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return questions[a].prompt.size() < questions[b].prompt.size(); });
  const bool pad = model.takes_packed_documents();  // else a batch is of prompts of one length
  std::vector<std::vector<int64_t>> generated(questions.size());
  for (size_t begin = 0; begin < order.size();) {
    const size_t length = questions[order[begin]].prompt.size();
    size_t end = begin + 1;
    while (end < order.size() && end - begin < static_cast<size_t>(batch_size) && (pad || questions[order[end]].prompt.size() == length)) ++end;
    const size_t longest = questions[order[end - 1]].prompt.size();
    at::Tensor ids = torch::full({static_cast<int64_t>(end - begin), static_cast<int64_t>(longest)}, tokenizer.eod(), torch::kLong);
    std::vector<int64_t> left_padding;
    for (size_t i = begin; i < end; ++i) {
      const auto& prompt = questions[order[i]].prompt;
      left_padding.push_back(static_cast<int64_t>(longest - prompt.size()));
      std::copy(prompt.begin(), prompt.end(), ids[static_cast<int64_t>(i - begin)].data_ptr<int64_t>() + left_padding.back());
    }
    how.max_length = ids.size(1) + max_new_tokens;
    if (max_positions > 0) how.max_length = std::min(how.max_length, max_positions);
    const auto rows = continue_greedily(model, ids, at::Tensor(), how, pad ? left_padding : std::vector<int64_t>{});
    for (size_t i = begin; i < end; ++i) generated[order[i]] = rows[i - begin];
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
