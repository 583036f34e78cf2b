// megacpp-answer: greedy answers of a checkpoint to held-out conversations, and their
// exact-answer accuracy (the share of answers equal to the reference, white space trimmed).
//   megacpp-answer --load SAVE --input held_out.jsonl [--handler-name H] [--prompt-type T]
//                  [tokenizer flags] [--ckpt-step N] [--micro-batch-size 32] [--max-new-tokens 64] [--show 5]
// The conversations are JSON lines as megacpp-preprocess reads them (Note [Instruction data]);
// the last message of each is the reference answer. The chat template and tokenizer must be the
// training data's. Argument errors exit 2, failures 1.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/model_args.h"
#include "inference/answering.h"
#include "io/data/instruction_data.h"
#include "io/data/tokenizer/tokenizer_flags.h"
#include "launch/load_section.h"
#include "launch/tool_run.h"
#include "models/model_flags.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-answer", "Answer held-out conversations greedily with a checkpoint and score the exact answers.");
  auto text = [] { return cxxopts::value<std::string>(); };
  launch::add_load_flags(o, "", "to answer with");
  o.add_options()
      ("input", "JSON lines of conversations; the last message of each is the reference answer", text()->default_value(""))
      ("handler-name", "AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler", text()->default_value("AlpacaStyleInstructionHandler"))
      ("map-keys", "the dataset's key names and role tags, a JSON object", text()->default_value(""))
      ("prompt-type", "the chat template: qwen, chatml, llama3 or empty (default: the tokenizer folder's)", text()->default_value(""));
  io::data::add_tokenizer_flags(o, "");
  o.add_options()
      ("micro-batch-size", "conversations answered together", text()->default_value("32"))
      ("max-new-tokens", "the longest answer, in tokens", text()->default_value("64"))
      ("show", "answers printed besides the score", text()->default_value("5"));
  return o;
}

int64_t positive(const cxxopts::ParseResult& r, const std::string& flag) {
  const auto n = models::parse_flag_number<int64_t>(flag, r[flag].as<std::string>());
  if (n <= 0) throw std::invalid_argument("--" + flag + " must be positive");
  return n;
}

int answer(const cxxopts::ParseResult& r) {
  const std::string load = r["load"].as<std::string>(), input = r["input"].as<std::string>();
  if (load.empty() || input.empty()) throw std::invalid_argument("megacpp-answer needs --load and --input");
  const std::string handler = r["handler-name"].as<std::string>();
  if (!io::data::is_instruction_handler(handler)) {
    throw std::invalid_argument("--handler-name " + handler + ": expected AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler");
  }
  const auto options = io::data::read_tokenizer_flags(r);
  const auto tokenizer = io::data::build_tokenizer(options);
  const auto chat = io::data::chat_template_of(r["prompt-type"].as<std::string>(), options, *tokenizer, "megacpp-answer");
  const int64_t batch = positive(r, "micro-batch-size"), new_tokens = positive(r, "max-new-tokens");
  const auto questions = inference::read_questions(input, handler, io::data::map_keys_of(r["map-keys"].as<std::string>()), chat, *tokenizer);

  const auto reader = launch::open_checkpoint(r);
  const auto model = checkpoint::load_checkpoint_model(reader);
  // Answers stop where the model's positions end (the args' max_position_embeddings; 0: no limit).
  const int64_t positions = checkpoint::args_json(reader.object("args")).value("max_position_embeddings", int64_t{0});
  const auto score = inference::score_answers(*model, questions, *tokenizer, inference::end_of_turn(chat), new_tokens, batch, positions);
  const auto show = static_cast<size_t>(models::parse_flag_number<int64_t>("show", r["show"].as<std::string>()));
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

int main(int argc, char** argv) { megacpp::end_process(megacpp::launch::run_tool("megacpp-answer", make_options(), argc, argv, answer)); }
