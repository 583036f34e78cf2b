#include <gtest/gtest.h>

#include <stdexcept>

#include "megacpp/config/fsdp2_config_yaml.h"

namespace megacpp::config {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_fsdp2_config(yaml, "cfg.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(FSDP2ConfigYaml, ReadsMindSpeedKeys) {
  auto c = parse_fsdp2_config(R"(
sharding_size: 2
sub_modules_to_wrap: ["layers.{*}"]
ignored_modules: [embed_tokens]
recompute_modules: layers.{0-1}
reshard_after_forward: false
param_dtype: bf16
reduce_dtype: torch.float32
output_dtype: float32
cast_forward_inputs: false
num_to_forward_prefetch: 1
num_to_backward_prefetch: 2
)", "cfg.yaml");
  EXPECT_EQ(c.sharding_size, 2);
  EXPECT_EQ(c.sub_modules_to_wrap, (std::vector<std::string>{"layers.{*}"}));
  EXPECT_EQ(c.ignored_modules, (std::vector<std::string>{"embed_tokens"}));
  EXPECT_EQ(c.recompute_modules, (std::vector<std::string>{"layers.{0-1}"}));
  EXPECT_FALSE(c.reshard_after_forward);
  EXPECT_EQ(*c.param_dtype, c10::kBFloat16);
  EXPECT_EQ(*c.reduce_dtype, c10::kFloat);
  EXPECT_EQ(*c.output_dtype, c10::kFloat);
  EXPECT_FALSE(c.cast_forward_inputs);
  EXPECT_EQ(c.num_to_forward_prefetch, 1);
  EXPECT_EQ(c.num_to_backward_prefetch, 2);
}

TEST(FSDP2ConfigYaml, DefaultsForAbsentKeys) {
  models::FSDP2Config defaults;
  defaults.param_dtype = c10::kBFloat16;
  auto c = parse_fsdp2_config("reshard_after_forward: true\n", "cfg.yaml", defaults);
  EXPECT_EQ(*c.param_dtype, c10::kBFloat16);
  EXPECT_EQ(c.sharding_size, -1);
  EXPECT_TRUE(parse_fsdp2_config("", "empty.yaml").sub_modules_to_wrap.empty());
}

TEST(FSDP2ConfigYaml, ErrorsNameTheFileAndKey) {
  EXPECT_NE(error_of("shard_size: 2").find("cfg.yaml: key 'shard_size': unknown key"), std::string::npos);
  EXPECT_NE(error_of("param_dtype: int8").find("key 'param_dtype': unknown dtype 'int8'"), std::string::npos);
  EXPECT_NE(error_of("reshard_after_forward: maybe").find("key 'reshard_after_forward': expected true or false"), std::string::npos);
  EXPECT_NE(error_of("num_to_forward_prefetch: -1").find("key 'num_to_forward_prefetch': must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("sharding_size: [1]").find("key 'sharding_size': expected an integer"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b").find("cfg.yaml: expected a mapping"), std::string::npos);
  EXPECT_NE(error_of("a: [").find("cfg.yaml: not valid YAML"), std::string::npos);
  try {
    load_fsdp2_config("/nonexistent/fsdp2.yaml");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--fsdp2-config-path: cannot read '/nonexistent/fsdp2.yaml'"), std::string::npos);
  }
}

}  // namespace
}  // namespace megacpp::config
