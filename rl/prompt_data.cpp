#include "rl/prompt_data.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::rl {
namespace {

PromptExample parse_example(const std::string& line, const std::string& where, const io::data::Tokenizer& tokenizer, int64_t max_tokens) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(where + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string() || !j.contains("answer") || !j["answer"].is_string()) {
    throw std::invalid_argument(where + ": expected an object with \"prompt\" and \"answer\" strings");
  }
  PromptExample example{tokenizer.tokenize(j["prompt"].get<std::string>()), j["answer"].get<std::string>()};
  if (example.ids.empty()) throw std::invalid_argument(where + ": an empty prompt");
  if (static_cast<int64_t>(example.ids.size()) >= max_tokens) {
    throw std::invalid_argument(where + ": the prompt has " + std::to_string(example.ids.size()) + " tokens, no room to answer within " +
                                std::to_string(max_tokens) + " (the prompt length: --seq-length minus the response length)");
  }
  return example;
}

}  // namespace

std::vector<PromptExample> read_prompts(const std::string& path, const std::string& flag, const io::data::Tokenizer& tokenizer,
                                        int64_t max_tokens) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(flag + " " + path + ": cannot be read");
  std::vector<PromptExample> examples;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    examples.push_back(parse_example(line, flag + " " + path + " line " + std::to_string(number), tokenizer, max_tokens));
  }
  if (examples.empty()) throw std::invalid_argument(flag + " " + path + ": no prompts");
  return examples;
}

}  // namespace megacpp::rl
