#include "io/data/instruction_data.h"

#include <chrono>
#include <fstream>
#include <map>
#include <stdexcept>
#include <vector>

#include "io/data/chat_template.h"
#include "io/data/indexed_dataset.h"
#include "io/data/sample_packing.h"

namespace megacpp::io::data {
namespace {

using nlohmann::json;
using jinja::Value;

const char* const kAlpaca = "AlpacaStyleInstructionHandler";
const char* const kShareGpt = "SharegptStyleInstructionHandler";

// MindSpeed-LLM's (LLaMA-Factory's) default column names and role tags, then --map-keys'.
json keys_for(const std::string& handler, const json& line, const json& map_keys) {
  json keys;
  if (handler == kAlpaca) {
    keys = {{"prompt", "instruction"}, {"query", "input"}, {"response", "output"}, {"system", "system"}, {"history", "history"}};
  } else if (!map_keys.contains("messages") && !line.contains("conversations") && line.contains("messages")) {
    keys = {{"messages", "messages"}, {"role_tag", "role"}, {"content_tag", "content"}, {"user_tag", "user"},
            {"assistant_tag", "assistant"}, {"system_tag", "system"}, {"observation_tag", "tool"},
            {"function_tag", "function_call"}, {"system", "system"}};  // OpenAI's messages
  } else {
    keys = {{"messages", "conversations"}, {"role_tag", "from"}, {"content_tag", "value"}, {"user_tag", "human"},
            {"assistant_tag", "gpt"}, {"system_tag", "system"}, {"observation_tag", "observation"},
            {"function_tag", "function_call"}, {"system", "system"}};
  }
  for (const auto& [key, value] : map_keys.items()) keys[key] = value;
  return keys;
}

// line[keys[name]] as a string; "" when absent and optional.
std::string text(const json& line, const json& keys, const std::string& name, bool required, const std::string& where) {
  const std::string key = keys.value(name, name);
  const auto it = line.find(key);
  if (it == line.end() || it->is_null()) {
    if (required) throw std::invalid_argument(where + ": no key '" + key + "' (the " + name + ")");
    return "";
  }
  if (!it->is_string()) throw std::invalid_argument(where + ": key '" + key + "': expected a string, got " + it->dump());
  return it->get<std::string>();
}

Value message(const std::string& role, const std::string& content) { return Value{{"role", role}, {"content", content}}; }

Value alpaca(const json& line, const json& keys, const std::string& where) {
  Value messages = Value::array();
  const std::string system = text(line, keys, "system", false, where);
  if (!system.empty()) messages.push_back(message("system", system));
  const std::string history_key = keys.value("history", "history");
  if (line.contains(history_key) && !line[history_key].is_null()) {
    const json& history = line[history_key];
    if (!history.is_array()) throw std::invalid_argument(where + ": key '" + history_key + "': expected [[user, assistant], ...]");
    for (const auto& turn : history) {
      if (!turn.is_array() || turn.size() != 2 || !turn[0].is_string() || !turn[1].is_string()) {
        throw std::invalid_argument(where + ": key '" + history_key + "': expected [[user, assistant], ...], got " + turn.dump());
      }
      messages.push_back(message("user", turn[0].get<std::string>()));
      messages.push_back(message("assistant", turn[1].get<std::string>()));
    }
  }
  const std::string prompt = text(line, keys, "prompt", true, where), query = text(line, keys, "query", false, where);
  messages.push_back(message("user", query.empty() ? prompt : prompt + "\n" + query));
  messages.push_back(message("assistant", text(line, keys, "response", true, where)));
  return messages;
}

Value sharegpt(const json& line, const json& keys, const std::string& where) {
  const std::string list_key = keys.value("messages", "conversations");
  const auto list = line.find(list_key);
  if (list == line.end() || !list->is_array()) throw std::invalid_argument(where + ": key '" + list_key + "': expected a list of messages");
  const std::map<std::string, std::string> roles{{keys["user_tag"], "user"},
                                                 {keys["assistant_tag"], "assistant"},
                                                 {keys["system_tag"], "system"},
                                                 {keys["observation_tag"], "tool"},
                                                 {keys["function_tag"], "assistant"}};
  Value messages = Value::array();
  const std::string system = text(line, keys, "system", false, where);
  if (!system.empty()) messages.push_back(message("system", system));
  for (const auto& m : *list) {
    const std::string role_tag = keys["role_tag"], content_tag = keys["content_tag"];
    if (!m.is_object() || !m.contains(role_tag) || !m[role_tag].is_string() || !m.contains(content_tag) || !m[content_tag].is_string()) {
      throw std::invalid_argument(where + ": key '" + list_key + "': each message needs string '" + role_tag + "' and '" +
                                  content_tag + "', got " + m.dump());
    }
    const auto role = roles.find(m[role_tag].get<std::string>());
    if (role == roles.end()) throw std::invalid_argument(where + ": unknown " + role_tag + " " + m[role_tag].dump());
    messages.push_back(message(role->second, m[content_tag].get<std::string>()));
  }
  return messages;
}

class Datasets {
 public:
  // `documents_dtype`: of the attention-mask dataset, wide enough for the conversations of a pack.
  Datasets(const std::string& prefix, int64_t vocab_size, TokenDtype documents_dtype)
      : ids_(create_token_dataset(instruction_input_ids_path(prefix), dtype_for_vocab_size(vocab_size))),
        labels_(create_token_dataset(instruction_labels_path(prefix), TokenDtype::kInt32)),
        mask_(create_token_dataset(instruction_attention_mask_path(prefix), documents_dtype)) {}

  // One sample: the conversations one after another, the attention mask numbering them 1, 2, ...
  void add(const std::vector<const ConversationTokens*>& pack) {
    std::vector<int64_t> ids, labels, mask;
    for (size_t c = 0; c < pack.size(); ++c) {
      const ConversationTokens& tokens = *pack[c];
      for (size_t i = 0; i < tokens.ids.size(); ++i) {
        ids.push_back(tokens.ids[i]);
        // A first token has nothing before it in its conversation to be predicted from.
        labels.push_back(tokens.trained[i] && i > 0 ? tokens.ids[i] : kIgnoreIndex);
        mask.push_back(static_cast<int64_t>(c + 1));
      }
    }
    const auto n = static_cast<int64_t>(ids.size());
    using Column = std::pair<TokenDatasetWriter*, const std::vector<int64_t>*>;
    for (const Column& column : {Column{ids_.get(), &ids}, Column{labels_.get(), &labels}, Column{mask_.get(), &mask}}) {
      column.first->add_sequence(column.second->data(), n);
      column.first->end_document();
    }
  }

  void finalize() {
    for (auto* writer : {ids_.get(), labels_.get(), mask_.get()}) writer->finalize();
  }

 private:
  std::unique_ptr<TokenDatasetWriter> ids_, labels_, mask_;
};

// The conversations in packs of at most `seq_length` tokens (--pack), written longest first.
void write_packed(Datasets& datasets, const std::vector<ConversationTokens>& conversations, int64_t seq_length,
                  InstructionResult& result) {
  std::vector<int64_t> lengths;
  for (const auto& c : conversations) lengths.push_back(static_cast<int64_t>(c.ids.size()));
  for (const auto& members : pack_samples(lengths, seq_length)) {
    std::vector<const ConversationTokens*> pack;
    for (int64_t m : members) pack.push_back(&conversations[static_cast<size_t>(m)]);
    datasets.add(pack);
    ++result.packs;
  }
}

// The end-of-document token as text, for --prompt-type empty ("" when it has none).
std::string eos_text(const Tokenizer& tokenizer) {
  try {
    return tokenizer.detokenize({tokenizer.eod()});
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

json map_keys_of(const std::string& text) {
  if (text.empty()) return json::object();
  json keys;
  try {
    keys = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument("--map-keys: not a JSON object: " + std::string(e.what()));
  }
  if (!keys.is_object()) throw std::invalid_argument("--map-keys: expected a JSON object, got " + keys.dump());
  return keys;
}

ChatTemplate chat_template_of(const std::string& prompt_type, const TokenizerOptions& options, const Tokenizer& tokenizer,
                              const std::string& who) {
  if (!prompt_type.empty()) return ChatTemplate::named(prompt_type, eos_text(tokenizer));
  if (options.tokenizer_model.empty()) {
    throw std::invalid_argument(who + " needs a chat template: --prompt-type, or a tokenizer folder (" + options.tokenizer_model_flag +
                                ") with one");
  }
  return ChatTemplate::from_folder(options.tokenizer_model);
}

std::string instruction_input_ids_path(const std::string& prefix) { return prefix + "_packed_input_ids_document"; }
std::string instruction_labels_path(const std::string& prefix) { return prefix + "_packed_labels_document"; }
std::string instruction_attention_mask_path(const std::string& prefix) { return prefix + "_packed_attention_mask_document"; }
std::string instruction_template_path(const std::string& prefix) { return prefix + "_packed_template.json"; }
bool is_instruction_handler(const std::string& handler) { return handler == kAlpaca || handler == kShareGpt; }

void check_instruction_prompt_type(const std::string& prefix, const std::string& prompt_type) {
  const std::string path = instruction_template_path(prefix);
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument("--prompt-type " + prompt_type + ": " + path + " is missing, so nothing says which chat template "
                                "rendered " + prefix + " (remake it with megacpp-preprocess, or leave --prompt-type out)");
  }
  json record;
  try {
    record = json::parse(in);
  } catch (const json::exception& e) {
    throw std::invalid_argument(path + ": not valid JSON: " + e.what());
  }
  const std::string made = record.value("prompt_type", std::string());
  if (made != prompt_type) {
    throw std::invalid_argument("--prompt-type " + prompt_type + ": " + prefix + " was rendered with " +
                                (made.empty() ? "its tokenizer folder's chat template" : "--prompt-type " + made) + " (" + path +
                                "): preprocess it again with --prompt-type " + prompt_type + " or give the same template here");
  }
}

Value conversation_of(const json& line, const std::string& handler, const json& map_keys, const std::string& where) {
  if (!line.is_object()) throw std::invalid_argument(where + ": expected a JSON object");
  const json keys = keys_for(handler, line, map_keys);
  return handler == kAlpaca ? alpaca(line, keys, where) : sharegpt(line, keys, where);
}

InstructionResult preprocess_instructions(const InstructionOptions& options, std::ostream* progress) {
  if (!is_instruction_handler(options.handler)) {
    throw std::invalid_argument("--handler-name " + options.handler + ": expected " + kAlpaca + " or " + kShareGpt);
  }
  const json map_keys = map_keys_of(options.map_keys);
  const auto tokenizer = build_tokenizer(options.tokenizer);
  const ChatTemplate chat = chat_template_of(options.prompt_type, options.tokenizer, *tokenizer, "--handler-name " + options.handler);
  std::ifstream in(options.input);
  if (!in) throw std::invalid_argument("--input " + options.input + ": cannot open");
  const auto start = std::chrono::steady_clock::now();
  if (options.pack && options.seq_length <= 0) throw std::invalid_argument("--pack needs --seq-length, the tokens of a pack");
  Datasets datasets(options.output_prefix, tokenizer->vocab_size(), options.pack ? TokenDtype::kInt32 : TokenDtype::kUInt8);
  std::vector<ConversationTokens> to_pack;
  InstructionResult result;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = options.input + ":" + std::to_string(number);
    json parsed;
    try {
      parsed = json::parse(line);
    } catch (const json::exception& e) {
      throw std::invalid_argument(where + ": not valid JSON: " + e.what());
    }
    const ConversationTokens tokens = tokenize_conversation(chat, *tokenizer, conversation_of(parsed, options.handler, map_keys, where), where);
    const auto n = static_cast<int64_t>(tokens.ids.size());
    if (options.seq_length > 0 && n > options.seq_length) {
      throw std::invalid_argument(where + ": " + std::to_string(n) + " tokens, longer than --seq-length " +
                                  std::to_string(options.seq_length));
    }
    if (options.pack) {
      to_pack.push_back(tokens);
    } else {
      datasets.add({&tokens});
      ++result.packs;
    }
    ++result.samples;
    result.tokens += n;
    for (uint8_t t : tokens.trained) result.trained_tokens += t;
    if (progress && result.samples % options.log_interval == 0) *progress << "processed " << result.samples << " samples\n";
  }
  if (result.samples == 0) throw std::invalid_argument("--input " + options.input + ": no samples");
  if (options.pack) write_packed(datasets, to_pack, options.seq_length, result);
  datasets.finalize();
  std::ofstream(instruction_template_path(options.output_prefix)) << json{{"prompt_type", options.prompt_type}, {"template", chat.name()}}.dump(2)
                                                                  << "\n";
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace megacpp::io::data
