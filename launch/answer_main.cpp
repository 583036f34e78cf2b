// megacpp-answer: greedy answers of a checkpoint to held-out conversations, and their
// exact-answer accuracy (the share of answers equal to the reference, white space trimmed).
//   megacpp-answer --load SAVE --input held_out.jsonl [--handler-name H] [--prompt-type T]
//                  [tokenizer flags] [--ckpt-step N] [--micro-batch-size 32] [--max-new-tokens 64] [--show 5]
// The conversations are JSON lines as megacpp-preprocess reads them (Note [Instruction data]);
// the last message of each is the reference answer. The chat template and tokenizer must be the
// training data's. Argument errors exit 2, failures 1.
#include <cxxopts.hpp>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/model_args.h"
#include "inference/answering.h"
#include "io/data/instruction_data.h"
#include "launch/inference_tool.h"
#include "models/model_flags.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-answer", "Answer held-out conversations greedily with a checkpoint and score the exact answers.");
  auto text = [] { return cxxopts::value<std::string>(); };
  o.add_options()
      ("load", "checkpoint root (Megatron layout)", text()->default_value(""))
      ("ckpt-step", "the iteration to load (default: the latest)", text()->default_value(""))
      ("input", "JSON lines of conversations; the last message of each is the reference answer", text()->default_value(""))
      ("handler-name", "AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler", text()->default_value("AlpacaStyleInstructionHandler"))
      ("map-keys", "the dataset's key names and role tags, a JSON object", text()->default_value(""))
      ("prompt-type", "the chat template: qwen, chatml, llama3 or empty (default: the tokenizer folder's)", text()->default_value(""))
      ("tokenizer-type", "the training data's tokenizer (default: HuggingFaceTokenizer with a tokenizer folder, else "
       "ByteLevelTokenizer)", text()->default_value(""))
      ("tokenizer-name-or-path", "HuggingFaceTokenizer: a folder with tokenizer.json (and the chat template)", text()->default_value(""))
      ("tokenizer-model", "the same as --tokenizer-name-or-path", text()->default_value(""))
      ("vocab-file", "GPT2BPETokenizer: encoder.json", text()->default_value(""))
      ("merge-file", "GPT2BPETokenizer: vocab.bpe", text()->default_value(""))
      ("vocab-size", "NullTokenizer: its ids", text()->default_value("0"))
      ("micro-batch-size", "conversations answered together", text()->default_value("32"))
      ("max-new-tokens", "the longest answer, in tokens", text()->default_value("64"))
      ("show", "answers printed besides the score", text()->default_value("5"))
      ("model-library", "a shared library registering model families", cxxopts::value<std::vector<std::string>>())
      ("h,help", "print this help");
  return o;
}

int64_t number(const cxxopts::ParseResult& r, const std::string& flag) {
  return models::parse_flag_number<int64_t>(flag, r[flag].as<std::string>());
}

io::data::TokenizerOptions tokenizer_options(const cxxopts::ParseResult& r) {
  io::data::TokenizerOptions o;
  io::data::set_tokenizer_model(o, r["tokenizer-model"].as<std::string>(), r["tokenizer-name-or-path"].as<std::string>());
  o.type = r["tokenizer-type"].as<std::string>();
  if (o.type.empty()) o.type = o.tokenizer_model.empty() ? "ByteLevelTokenizer" : "HuggingFaceTokenizer";
  o.vocab_file = r["vocab-file"].as<std::string>();
  o.merge_file = r["merge-file"].as<std::string>();
  o.vocab_size = number(r, "vocab-size");
  return o;
}

int answer(const cxxopts::ParseResult& r) {
  const std::string load = r["load"].as<std::string>(), input = r["input"].as<std::string>();
  if (load.empty() || input.empty()) throw std::invalid_argument("megacpp-answer needs --load and --input");
  const std::string handler = r["handler-name"].as<std::string>();
  if (!io::data::is_instruction_handler(handler)) {
    throw std::invalid_argument("--handler-name " + handler + ": expected AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler");
  }
  const std::string keys = r["map-keys"].as<std::string>();
  const nlohmann::json map_keys = keys.empty() ? nlohmann::json::object() : nlohmann::json::parse(keys);
  const auto options = tokenizer_options(r);
  const auto tokenizer = io::data::build_tokenizer(options);
  const std::string prompt_type = r["prompt-type"].as<std::string>();
  if (prompt_type.empty() && options.tokenizer_model.empty()) {
    throw std::invalid_argument("megacpp-answer needs a chat template: --prompt-type, or a tokenizer folder with one");
  }
  const auto chat = prompt_type.empty() ? io::data::ChatTemplate::from_folder(options.tokenizer_model)
                                        : io::data::ChatTemplate::named(prompt_type, tokenizer->detokenize({tokenizer->eod()}));
  const int64_t batch = number(r, "micro-batch-size");
  if (batch <= 0) throw std::invalid_argument("--micro-batch-size must be positive");
  const int64_t new_tokens = number(r, "max-new-tokens");
  if (new_tokens <= 0) throw std::invalid_argument("--max-new-tokens must be positive");
  const auto questions = inference::read_questions(input, handler, map_keys, chat, *tokenizer);

  const auto reader = launch::open_checkpoint(r);
  const auto model = checkpoint::load_checkpoint_model(reader);
  // Answers stop where the model's positions end (the args' max_position_embeddings; 0: no limit).
  const int64_t positions = checkpoint::args_json(reader.object("args")).value("max_position_embeddings", int64_t{0});
  const auto score = inference::score_answers(*model, questions, *tokenizer, inference::end_of_turn(chat), new_tokens, batch, positions);
  const auto show = static_cast<size_t>(number(r, "show"));
  for (size_t i = 0; i < std::min(show, score.answers.size()); ++i) {
    const auto& a = score.answers[i];
    std::printf("%s: \"%s\" (reference \"%s\")\n", a.where.c_str(), a.generated.c_str(), a.reference.c_str());
  }
  std::printf("exact-answer accuracy: %.2f%% (%lld of %lld conversations of %s answered as their reference by %s)\n",
              100.0 * score.accuracy(), static_cast<long long>(score.correct), static_cast<long long>(score.questions), input.c_str(),
              reader.dir().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  megacpp::end_process(megacpp::launch::run_inference_tool("megacpp-answer", make_options(), argc, argv, answer));
}
