// inference::generate (Note [Generation], Note [KV cache]): greedy generation of prompts of
// different lengths, batched, with and without the KV cache, equals argmax decoding of each
// prompt alone with the full forward at every step (Llama with GQA, Qwen3's q/k norms, Mistral's
// sliding window shorter than the output); stop tokens, `finished` and length limits end rows; sampling is
// reproducible with a seed; sample_tokens draws from the temperature / top-k / top-p
// distribution; bad settings are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "inference/generation.h"
#include "models/gpt/gpt_model.h"
#include "models/llama/llama_model.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

using Tokens = std::vector<int64_t>;

const std::vector<Tokens> kPrompts = {{3, 17, 42, 8, 25}, {5, 6}, {44, 1, 2, 9, 31, 30, 12, 7}};

std::shared_ptr<models::LlamaModel> model_of(const models::LlamaConfig& config) {
  auto model = std::make_shared<models::LlamaModel>(config, torch::TensorOptions().dtype(torch::kFloat));
  model->init_weights(0.5, 7);  // large enough weights that the greedy tokens vary
  return model;
}

// Argmax decoding of one prompt with the whole sequence read again at each step.
Tokens decode_alone(models::LanguageModel& model, Tokens ids, int64_t new_tokens, const Tokens& stop) {
  torch::NoGradGuard no_grad;
  model.eval();
  Tokens generated;
  while (static_cast<int64_t>(generated.size()) < new_tokens) {
    const at::Tensor logits = model(torch::tensor(ids, torch::kLong).unsqueeze(0))[0];
    const int64_t token = logits[-1].argmax().item<int64_t>();  // [seq, vocab]: the last position
    generated.push_back(token);
    ids.push_back(token);
    if (std::find(stop.begin(), stop.end(), token) != stop.end()) break;
  }
  model.train();
  return generated;
}

void expect_greedy_is_argmax_decoding(const models::LlamaConfig& config, const std::string& what) {
  auto model = model_of(config);
  const int64_t new_tokens = 7;
  // A stop token: the third token the first prompt gets without one.
  const Tokens stop{decode_alone(*model, kPrompts[0], new_tokens, {})[2]};
  inference::Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = new_tokens;
  greedy.stop = stop;
  for (bool cache : {true, false}) {
    greedy.kv_cache = cache;
    const auto generated = inference::generate(*model, kPrompts, greedy);
    ASSERT_EQ(generated.size(), kPrompts.size());
    for (size_t r = 0; r < kPrompts.size(); ++r) {
      const Tokens expected = decode_alone(*model, kPrompts[r], new_tokens, stop);
      EXPECT_EQ(generated[r].tokens, expected) << what << ", prompt " << r << (cache ? ", KV cache" : ", no cache");
      EXPECT_EQ(generated[r].stopped, expected.back() == stop[0]) << what << ", prompt " << r;
    }
    EXPECT_TRUE(generated[0].stopped && generated[0].tokens.size() <= 3u) << what;
  }
  EXPECT_TRUE(model->is_training()) << "the model is left in the mode it was in";
}

TEST(Generation, GreedyIsArgmaxDecodingWithAndWithoutTheKvCache) {
  expect_greedy_is_argmax_decoding(testing::tiny_llama(/*tied=*/true, /*qwen3=*/false), "llama (GQA, tied)");
  expect_greedy_is_argmax_decoding(testing::tiny_llama(/*tied=*/false, /*qwen3=*/true), "qwen3 (q/k norms)");
  models::LlamaConfig mistral = testing::tiny_llama(false, false);
  mistral.sliding_window = 4;  // shorter than prompt + output
  expect_greedy_is_argmax_decoding(mistral, "mistral (sliding window 4)");
}

// `finished` (a multi-token end of turn) ends a row after the token that completes it, kept; the
// other rows go on.
TEST(Generation, FinishedEndsARowWithItsLastTokenKept) {
  auto model = model_of(testing::tiny_llama(false, false));
  const int64_t new_tokens = 6;
  const Tokens alone = decode_alone(*model, kPrompts[1], new_tokens, {});
  const Tokens end_of_turn(alone.begin() + 1, alone.begin() + 3);  // its 2nd and 3rd tokens
  inference::Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = new_tokens;
  greedy.finished = [&](const Tokens& tokens) {
    return tokens.size() >= 2 && Tokens(tokens.end() - 2, tokens.end()) == end_of_turn;
  };
  for (bool cache : {true, false}) {
    greedy.kv_cache = cache;
    const auto generated = inference::generate(*model, kPrompts, greedy);
    EXPECT_EQ(generated[1].tokens, Tokens(alone.begin(), alone.begin() + 3)) << (cache ? "KV cache" : "no cache");
    EXPECT_TRUE(generated[1].stopped);
    for (size_t r : {0, 2}) {
      const Tokens other = decode_alone(*model, kPrompts[r], new_tokens, {});
      const bool ends = greedy.finished(generated[r].tokens);
      EXPECT_EQ(generated[r].stopped, ends) << "prompt " << r;
      EXPECT_EQ(generated[r].tokens, Tokens(other.begin(), other.begin() + static_cast<int64_t>(generated[r].tokens.size())));
      if (!ends) EXPECT_EQ(generated[r].tokens.size(), static_cast<size_t>(new_tokens)) << "prompt " << r;
    }
  }
}

TEST(Generation, SamplingIsReproducibleWithASeedAndEndsAtTheContext) {
  auto model = model_of(testing::tiny_llama(false, false));
  inference::Sampling s;
  s.temperature = 1.0;
  s.top_p = 0.9;
  s.top_k = 20;
  s.max_new_tokens = 10;
  s.seed = 42;
  const auto first = inference::generate(*model, kPrompts, s), again = inference::generate(*model, kPrompts, s);
  s.seed = 43;
  const auto other = inference::generate(*model, kPrompts, s);
  bool differs = false;
  for (size_t r = 0; r < kPrompts.size(); ++r) {
    EXPECT_EQ(first[r].tokens, again[r].tokens) << "prompt " << r;
    EXPECT_EQ(first[r].tokens.size(), 10u);
    EXPECT_FALSE(first[r].stopped);
    differs = differs || first[r].tokens != other[r].tokens;
  }
  EXPECT_TRUE(differs) << "another seed draws other tokens";
  // top_k 1 samples the most likely token: greedy. The context (max_length 12) ends rows early.
  s.top_k = 1;
  s.max_length = 12;
  inference::Sampling greedy = s;
  greedy.temperature = 0;
  const auto top1 = inference::generate(*model, kPrompts, s), argmax = inference::generate(*model, kPrompts, greedy);
  for (size_t r = 0; r < kPrompts.size(); ++r) {
    EXPECT_EQ(top1[r].tokens, argmax[r].tokens) << "prompt " << r;
    EXPECT_EQ(top1[r].tokens.size(), std::min<size_t>(10, 12 - kPrompts[r].size())) << "prompt " << r;
  }
}

// Frequencies of 40,000 draws from p = (0.4, 0.3, 0.2, 0.1).
std::vector<double> frequencies(const inference::Sampling& s) {
  const int64_t draws = 40000;
  const at::Tensor logits = torch::tensor({0.4, 0.3, 0.2, 0.1}).log().unsqueeze(0).expand({draws, 4});
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(s.seed);
  const at::Tensor tokens = inference::sample_tokens(logits, s, generator);
  const at::Tensor counts = torch::bincount(tokens, {}, 4).to(torch::kDouble) / draws;
  return {counts.data_ptr<double>(), counts.data_ptr<double>() + 4};
}

void expect_frequencies(const inference::Sampling& s, const std::vector<double>& expected, const std::string& what) {
  const std::vector<double> got = frequencies(s);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 0.01) << what << ", token " << i;
}

TEST(Generation, SamplesTheTemperatureTopKAndTopPDistribution) {
  inference::Sampling s;
  expect_frequencies(s, {0.4, 0.3, 0.2, 0.1}, "plain");
  s.top_k = 3;
  expect_frequencies(s, {0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0}, "top_k 3");
  s.top_k = 0;
  s.top_p = 0.6;  // 0.4 + 0.3 reach it
  expect_frequencies(s, {0.4 / 0.7, 0.3 / 0.7, 0, 0}, "top_p 0.6");
  s.top_p = 1;
  s.temperature = 2;  // p^(1/2), normalized
  const double z = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
  expect_frequencies(s, {std::sqrt(0.4) / z, std::sqrt(0.3) / z, std::sqrt(0.2) / z, std::sqrt(0.1) / z}, "temperature 2");
  s.temperature = 1;
  s.vocabulary = 2;  // the padded vocabulary's rest is never drawn
  expect_frequencies(s, {0.4 / 0.7, 0.3 / 0.7, 0, 0}, "vocabulary 2");
}

TEST(Generation, RefusesSettingsByName) {
  auto llama = model_of(testing::tiny_llama(false, false));
  models::GptConfig gpt_config;
  gpt_config.vocab_size = 50;
  gpt_config.hidden_size = 16;
  gpt_config.max_position_embeddings = 32;
  models::GptModel gpt(gpt_config, torch::TensorOptions().dtype(torch::kFloat));
  gpt.init_weights(0.2, 3);
  auto refused = [](models::LanguageModel& model, const std::vector<Tokens>& prompts, const inference::Sampling& s,
                    const std::string& message) {
    try {
      inference::generate(model, prompts, s);
      ADD_FAILURE() << "not refused: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  inference::Sampling s;
  refused(gpt, {{1, 2}}, s, "the GPT2LMHeadModel model keeps no KV cache");
  s.kv_cache = false;
  s.max_length = 32;  // gpt's position table
  EXPECT_EQ(inference::generate(gpt, {{1, 2}, {3, 4, 5}}, s)[1].tokens.size(), 29u) << "without a cache";
  s.max_length = 8;
  refused(*llama, {{1, 2}, {1, 2, 3, 4, 5, 6, 7, 8}}, s, "prompt 1 has 8 tokens: the context of 8 leaves no room");
  refused(*llama, {{}}, s, "prompt 0 is empty");
  s.top_p = 0;
  refused(*llama, {{1}}, s, "top_p must be in (0, 1]");
}

}  // namespace
}  // namespace megacpp
