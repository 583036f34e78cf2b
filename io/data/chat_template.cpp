#include "io/data/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;
using jinja::Value;

const char* const kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// MindSpeed-LLM's (LLaMA-Factory's) prompt types, as templates.
const std::map<std::string, std::string>& prompt_types() {
  static const std::map<std::string, std::string> types{
      {"chatml", kChatMl},
      {"qwen", std::string("{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant."
                           "<|im_end|>\\n' }}{% endif %}") + kChatMl},
      {"llama3",
       "{{ '<|begin_of_text|>' }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
       "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
      {"empty",
       "{% for message in messages %}{{ message['content'] }}{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
       "{% endfor %}"},
  };
  return types;
}

// "chatml, empty, llama3, qwen", for messages.
std::string prompt_type_names() {
  std::string names;
  for (const auto& [name, source] : prompt_types()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// tokenizer_config.json's bos_token / eos_token: a string, or an AddedToken {"content": ...}.
std::string special_token(const Value& config, const std::string& key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

bool starts_with(const std::vector<int64_t>& ids, const std::vector<int64_t>& prefix) {
  return prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string name, std::string bos_token, std::string eos_token)
    : template_(source, std::move(name)), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {}

ChatTemplate ChatTemplate::from_folder(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "tokenizer_config.json", jinja_path = fs::path(dir) / "chat_template.jinja";
  Value config = Value::object();
  if (fs::exists(config_path)) {
    try {
      config = Value::parse(read_text(config_path));
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(config_path.string() + ": not valid JSON: " + e.what());
    }
  }
  const std::string bos = special_token(config, "bos_token"), eos = special_token(config, "eos_token");
  if (fs::exists(jinja_path)) return ChatTemplate(read_text(jinja_path), jinja_path.string(), bos, eos);
  const auto it = config.find("chat_template");
  const std::string where = config_path.string() + " chat_template";
  if (it != config.end() && it->is_string()) return ChatTemplate(it->get<std::string>(), where, bos, eos);
  if (it != config.end() && it->is_array()) {
    for (const auto& named : *it) {
      if (named.value("name", "") == "default" && named.contains("template")) {
        return ChatTemplate(named["template"].get<std::string>(), where + " 'default'", bos, eos);
      }
    }
  }
  throw std::invalid_argument(dir + ": no chat template (neither tokenizer_config.json's chat_template nor chat_template.jinja); "
                              "give one of --prompt-type " + prompt_type_names());
}

ChatTemplate ChatTemplate::named(const std::string& prompt_type, const std::string& eos_token) {
  const auto it = prompt_types().find(prompt_type);
  if (it == prompt_types().end()) {
    throw std::invalid_argument("--prompt-type " + prompt_type + ": not one of " + prompt_type_names() +
                                " (or leave it out to use the tokenizer folder's chat template)");
  }
  return ChatTemplate(it->second, "--prompt-type " + prompt_type, "", eos_token);
}

std::string ChatTemplate::render(const Value& messages, bool add_generation_prompt) const {
  return template_.render(
      {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}, {"bos_token", bos_token_}, {"eos_token", eos_token_}});
}

ConversationTokens tokenize_conversation(const ChatTemplate& chat, const Tokenizer& tokenizer, const Value& messages,
                                         const std::string& where) {
  if (!messages.is_array() || messages.empty()) throw std::invalid_argument(where + ": expected a list of messages");
  const auto ids = [&](size_t count, bool generation) {
    Value head = Value::array();
    for (size_t i = 0; i < count; ++i) head.push_back(messages[i]);
    return tokenizer.tokenize_without_added_specials(chat.render(head, generation));
  };
  ConversationTokens out;
  out.ids = ids(messages.size(), false);
  out.trained.assign(out.ids.size(), 0);
  bool any = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "assistant") continue;
    any = true;
    const std::vector<int64_t> prompt = ids(i, true), turn = ids(i + 1, false);
    const auto end = std::mismatch(turn.begin(), turn.end(), out.ids.begin(), out.ids.end()).first - turn.begin();
    if (!starts_with(out.ids, prompt) || end <= static_cast<std::ptrdiff_t>(prompt.size())) {
      throw std::invalid_argument(where + ": message " + std::to_string(i) + " (assistant): " + chat.name() +
                                  " renders the conversation up to it otherwise than as the start of the whole one (it "
                                  "rewrites earlier turns), so its loss mask cannot be found; train on single-turn "
                                  "samples or give --prompt-type");
    }
    std::fill(out.trained.begin() + static_cast<std::ptrdiff_t>(prompt.size()), out.trained.begin() + end, 1);
  }
  if (!any) throw std::invalid_argument(where + ": no assistant message to train on");
  return out;
}

}  // namespace megacpp::io::data
