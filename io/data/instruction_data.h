// Note [Instruction data]
// MindSpeed-LLM's instruction datasets. megacpp-preprocess --handler-name
// AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler reads JSON lines, one
// conversation each:
//   Alpaca    {"instruction", "input", "output", "system"?, "history"? [[user, assistant], ...]}:
//             the user's message is the instruction, then "\n" and the input when there is one;
//   ShareGPT  {"conversations": [{"from": "human"|"gpt"|"system"|..., "value"}], "system"?}, or
//             OpenAI's {"messages": [{"role", "content"}]};
// (--map-keys renames the keys and tags, as MindSpeed-LLM's), renders and tokenizes each with a
// chat template and marks the assistants' tokens (Note [Chat templates] in chat_template.h), and
// writes MindSpeed-LLM's three datasets, one sequence per conversation:
//   PREFIX_packed_input_ids_document       the tokens
//   PREFIX_packed_labels_document          the tokens the loss counts, -100 elsewhere (IGNORE_INDEX)
//   PREFIX_packed_attention_mask_document  1 per token
// which training reads by PREFIX (--data-path PREFIX --is-instruction-dataset). With --pack the
// conversations are packed, several to a sequence of at most --seq-length tokens
// (io/data/sample_packing.h), and the attention mask numbers them 1, 2, ... within it (as
// MindSpeed-LLM's --neat-pack, LLaMA-Factory's neat_packing), which training reads with
// --reset-attention-mask and --reset-position-ids (Note [Packed documents] in
// models/language_model.h). A conversation's first label is never counted, so no loss crosses
// from one conversation of a pack into the next.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "io/data/chat_template.h"
#include "io/data/jinja/value.h"
#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

inline constexpr int64_t kIgnoreIndex = -100;  // a label the loss skips (PyTorch's and MindSpeed-LLM's)

// The three dataset paths of a prefix ("PREFIX_packed_input_ids_document", ...).
std::string instruction_input_ids_path(const std::string& prefix);
std::string instruction_labels_path(const std::string& prefix);
std::string instruction_attention_mask_path(const std::string& prefix);
// PREFIX_packed_template.json: {"prompt_type": --prompt-type ("" for the tokenizer folder's
// template), "template": its name}, which chat template rendered the conversations.
std::string instruction_template_path(const std::string& prefix);
// Training's --prompt-type: throws std::invalid_argument naming the file and both templates
// unless PREFIX's conversations were rendered with `prompt_type`.
void check_instruction_prompt_type(const std::string& prefix, const std::string& prompt_type);
// Whether `handler` (--handler-name) is one of the instruction handlers.
bool is_instruction_handler(const std::string& handler);

// --map-keys' text as a JSON object ({} when empty). Throws std::invalid_argument naming the flag.
nlohmann::json map_keys_of(const std::string& text);

// The chat template conversations are rendered with: --prompt-type's (the tokenizer's end of
// document as its eos_token), else the tokenizer folder's. Throws std::invalid_argument "WHO
// needs a chat template: ..." when neither is given, and naming the flag or file at fault.
ChatTemplate chat_template_of(const std::string& prompt_type, const TokenizerOptions& options, const Tokenizer& tokenizer,
                              const std::string& who);

struct InstructionOptions {
  std::string input;          // --input: JSON lines
  std::string output_prefix;  // --output-prefix
  std::string handler;        // --handler-name
  std::string prompt_type;    // --prompt-type; empty: the tokenizer folder's chat template
  std::string map_keys;       // --map-keys: a JSON object, or empty
  int64_t seq_length = 0;     // --seq-length: longer conversations are refused (0: any length)
  bool pack = false;          // --pack: several conversations to a sequence of --seq-length tokens
  int64_t log_interval = 1000;
  TokenizerOptions tokenizer;
};

// One JSON line's conversation (a list of {"role", "content"}). Throws std::invalid_argument
// starting with `where` (FILE:LINE) naming the missing or mistyped key.
jinja::Value conversation_of(const nlohmann::json& line, const std::string& handler, const nlohmann::json& map_keys,
                             const std::string& where);

struct InstructionResult {
  int64_t samples = 0, tokens = 0, trained_tokens = 0;
  int64_t packs = 0;  // the sequences written (the samples, without --pack)
  double seconds = 0;
};

// Writes the three datasets (renamed into place at the end: nothing is left on an error).
// Throws std::invalid_argument naming the flag, or FILE:LINE and what is wrong with that sample.
InstructionResult preprocess_instructions(const InstructionOptions& options, std::ostream* progress);

}  // namespace megacpp::io::data
