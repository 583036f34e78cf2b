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
// which training reads by PREFIX (--data-path PREFIX --is-instruction-dataset).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "io/data/jinja/value.h"
#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

inline constexpr int64_t kIgnoreIndex = -100;  // a label the loss skips (PyTorch's and MindSpeed-LLM's)

// The three dataset paths of a prefix ("PREFIX_packed_input_ids_document", ...).
std::string instruction_input_ids_path(const std::string& prefix);
std::string instruction_labels_path(const std::string& prefix);
std::string instruction_attention_mask_path(const std::string& prefix);
// Whether `handler` (--handler-name) is one of the instruction handlers.
bool is_instruction_handler(const std::string& handler);

struct InstructionOptions {
  std::string input;          // --input: JSON lines
  std::string output_prefix;  // --output-prefix
  std::string handler;        // --handler-name
  std::string prompt_type;    // --prompt-type; empty: the tokenizer folder's chat template
  std::string map_keys;       // --map-keys: a JSON object, or empty
  int64_t seq_length = 0;     // --seq-length: longer conversations are refused (0: any length)
  int64_t log_interval = 1000;
  TokenizerOptions tokenizer;
};

// One JSON line's conversation (a list of {"role", "content"}). Throws std::invalid_argument
// starting with `where` (FILE:LINE) naming the missing or mistyped key.
jinja::Value conversation_of(const nlohmann::json& line, const std::string& handler, const nlohmann::json& map_keys,
                             const std::string& where);

struct InstructionResult {
  int64_t samples = 0, tokens = 0, trained_tokens = 0;
  double seconds = 0;
};

// Writes the three datasets (renamed into place at the end: nothing is left on an error).
// Throws std::invalid_argument naming the flag, or FILE:LINE and what is wrong with that sample.
InstructionResult preprocess_instructions(const InstructionOptions& options, std::ostream* progress);

}  // namespace megacpp::io::data
