#include <gtest/gtest.h>

#include <stdexcept>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "models/module_path.h"

namespace megacpp::models {
namespace {

TEST(ModulePathPattern, BracesSelectOneSegment) {
  ModulePathPattern any("layers.{*}");
  EXPECT_TRUE(any.matches("layers.0"));
  EXPECT_TRUE(any.matches("layers.12"));
  EXPECT_FALSE(any.matches("layers.0.mlp"));
  EXPECT_FALSE(any.matches("layers"));
  ModulePathPattern some("layers.{0-3,6}");
  for (auto p : {"layers.0", "layers.3", "layers.6"}) EXPECT_TRUE(some.matches(p)) << p;
  for (auto p : {"layers.4", "layers.7", "layers.x"}) EXPECT_FALSE(some.matches(p)) << p;
  ModulePathPattern suffix("layers.{1}.mlp");
  EXPECT_TRUE(suffix.matches("layers.1.mlp"));
  EXPECT_FALSE(suffix.matches("layers.1.self_attn"));
  EXPECT_TRUE(ModulePathPattern("norm").matches("norm"));
  EXPECT_FALSE(ModulePathPattern("norm").matches("layers.0.norm"));
}

TEST(ModulePathPattern, MalformedPatternsAreErrors) {
  EXPECT_THROW(ModulePathPattern("layers.{0-"), std::invalid_argument);
  EXPECT_THROW(ModulePathPattern("layers.{a}"), std::invalid_argument);
  EXPECT_THROW(ModulePathPattern("layers.{3-1}"), std::invalid_argument);
  EXPECT_THROW(ModulePathPattern("layers.{*}{*}"), std::invalid_argument);
  EXPECT_THROW(ModulePathPattern("layers.{*"), std::invalid_argument);
  EXPECT_THROW(ModulePathPattern("layers.*}"), std::invalid_argument);
}

TEST(ModulePathPattern, EverySegmentMayBeAGroup) {
  ModulePathPattern experts("layers.{*}.mlp.experts.{*}");
  for (auto p : {"layers.0.mlp.experts.0", "layers.11.mlp.experts.7"}) EXPECT_TRUE(experts.matches(p)) << p;
  for (auto p : {"layers.0.mlp.experts", "layers.0.mlp.experts.0.up_proj", "layers.0.mlp.gate", "layers..mlp.experts.0"}) {
    EXPECT_FALSE(experts.matches(p)) << p;
  }
  ModulePathPattern some("layers.{0,2}.mlp.experts.{4-5}");
  EXPECT_TRUE(some.matches("layers.2.mlp.experts.5"));
  EXPECT_FALSE(some.matches("layers.1.mlp.experts.5"));
  EXPECT_FALSE(some.matches("layers.2.mlp.experts.3"));
  EXPECT_TRUE(ModulePathPattern("{*}.{*}").matches("layers.0"));
  EXPECT_TRUE(ModulePathPattern("h{*}").matches("h12"));
  EXPECT_FALSE(ModulePathPattern("h{*}").matches("h"));
}

TEST(ModulePathPattern, MatchesModulesOfAModel) {
  LlamaConfig config;
  config.num_layers = 3;
  config.max_position_embeddings = 8;
  auto model = std::make_shared<LlamaModel>(config, torch::TensorOptions().device(torch::kMeta));
  EXPECT_EQ(match_module_paths(*model, {"layers.{0,2}", "norm"}, "k"),
            (std::vector<std::string>{"layers.0", "layers.2", "norm"}));
  try {
    match_module_paths(*model, {"layer.{*}"}, "sub_modules_to_wrap");
    ADD_FAILURE() << "a pattern matching nothing must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sub_modules_to_wrap: pattern 'layer.{*}' matches no module"), std::string::npos);
  }
}

}  // namespace
}  // namespace megacpp::models
