// Note [Chat templates]
// Instruction data is a conversation (system, user and assistant messages) rendered to text by
// a chat template and tokenized as transformers' apply_chat_template(tokenize=True) does: the
// whole text at once, without the special tokens a post-processor would add (the template
// writes them). The template is the tokenizer folder's (tokenizer_config.json's chat_template,
// or chat_template.jinja) or one of MindSpeed-LLM's --prompt-type names, run by megacpp's Jinja
// (io/data/jinja/). The loss is taken on the assistant's messages only: for each, the tokens
// after the conversation before it rendered with the generation prompt (which must be how the
// whole conversation's tokens begin) as far as the conversation up to it and the whole one agree.
// A template that rewrites earlier turns (Qwen3's drops their reasoning) leaves no such tokens and
// the sample is refused, naming it; one that always ends with a generation prompt (Llama 3's
// first) trains on the header tokens shared with the next turn too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/data/jinja/template.h"
#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

class ChatTemplate {
 public:
  // The template of a tokenizer folder: tokenizer_config.json's chat_template (a string, or the
  // one named "default" of a list) or chat_template.jinja, with its bos_token and eos_token.
  // Throws std::invalid_argument naming the files when there is none.
  static ChatTemplate from_folder(const std::string& dir);
  // MindSpeed-LLM's --prompt-type: qwen (ChatML with Qwen2.5's default system prompt), chatml,
  // llama3, empty (the messages' text one after another, `eos_token` after each assistant's).
  // Throws naming the flag for others.
  static ChatTemplate named(const std::string& prompt_type, const std::string& eos_token = "");

  ChatTemplate(const std::string& source, std::string name, std::string bos_token = "", std::string eos_token = "");

  // Throws std::runtime_error naming the template and line (a template's raise_exception too).
  std::string render(const jinja::Value& messages, bool add_generation_prompt) const;
  const std::string& name() const { return template_.name(); }

 private:
  jinja::Template template_;
  std::string bos_token_, eos_token_;
};

struct ConversationTokens {
  std::vector<int64_t> ids;
  std::vector<uint8_t> trained;  // 1 where the token belongs to an assistant message (the loss counts it)
};

// `messages` (a list of {"role", "content"}) rendered and tokenized, with the assistant tokens
// marked (Note [Chat templates]). Throws std::invalid_argument starting with `where` (a file and
// line) when the conversation has no assistant message or its mask cannot be found.
ConversationTokens tokenize_conversation(const ChatTemplate& chat, const Tokenizer& tokenizer, const jinja::Value& messages,
                                         const std::string& where);

}  // namespace megacpp::io::data
