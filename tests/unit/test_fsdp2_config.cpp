#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <torch/torch.h>

#include "settings/fsdp2_config_yaml.h"
#include "settings/parallelism.h"
#include "models/llama/llama_model.h"
#include "models/llava/llava_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::settings {
namespace {

using Strings = std::vector<std::string>;

std::string error_of(const std::string& yaml) {
  try {
    parse_fsdp2_config(yaml, "cfg.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A small Llama (2 layers) on the CPU, tied or untied.
std::shared_ptr<models::LlamaModel> small_llama(bool tied = true) {
  models::LlamaConfig config;
  config.num_layers = 2;
  config.hidden_size = 16;
  config.num_attention_heads = 2;
  config.vocab_size = 32;
  config.tie_embeddings = tied;
  return std::make_shared<models::LlamaModel>(config, torch::TensorOptions());
}

// fully_shard keeps a pointer to its mesh: one that outlives every model of these tests.
const parallel::DeviceMesh& single_mesh() {
  static const parallel::DeviceMesh mesh = parallel::DeviceMesh::single();
  return mesh;
}

// `config` with its wrapping and recompute resolved against `model`'s classes, as parallelize
// resolves them.
FSDP2Config resolved_by(const models::LanguageModel& model, FSDP2Config config) {
  config.wrap = model.resolve_module_classes(config.wrap);
  config.recompute = model.resolve_module_classes(config.recompute);
  return config;
}

std::string describe(const FSDP2Config& c) {
  auto list = [](const Strings& v) {
    std::string out = "[";
    for (auto& s : v) out += (out.size() > 1 ? ", " : "") + s;
    return out + "]";
  };
  auto dtype = [](const c10::optional<c10::ScalarType>& t) { return t ? std::string(c10::toString(*t)) : "unset"; };
  return "sharding_size=" + std::to_string(c.sharding_size) + " sub_modules_to_wrap=" + list(c.wrap.sub_modules_to_wrap) +
         " ignored=" + list(c.wrap.ignored_modules) + " recompute=" + list(c.recompute.recompute_modules) +
         " reshard=" + std::to_string(c.sharding.reshard_after_forward) + " param=" + dtype(c.sharding.param_dtype) +
         " reduce=" + dtype(c.sharding.reduce_dtype) + " output=" + dtype(c.sharding.output_dtype) +
         " cast=" + std::to_string(c.sharding.cast_forward_inputs) + " prefetch=" + std::to_string(c.sharding.num_to_forward_prefetch) +
         "/" + std::to_string(c.sharding.num_to_backward_prefetch) + " classes=" + list(c.wrap.module_classes_to_wrap) +
         " default_classes=" + std::to_string(c.wrap.wrap_default_module_classes) +
         " wrap_embeddings=" + std::to_string(c.wrap.wrap_embeddings) + " wrap_lm_output=" + std::to_string(c.wrap.wrap_lm_output);
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
  EXPECT_EQ(c.wrap.sub_modules_to_wrap, (std::vector<std::string>{"layers.{*}"}));
  EXPECT_EQ(c.wrap.ignored_modules, (std::vector<std::string>{"embed_tokens"}));
  EXPECT_EQ(c.recompute.recompute_modules, (std::vector<std::string>{"layers.{0-1}"}));
  EXPECT_FALSE(c.sharding.reshard_after_forward);
  EXPECT_EQ(*c.sharding.param_dtype, c10::kBFloat16);
  EXPECT_EQ(*c.sharding.reduce_dtype, c10::kFloat);
  EXPECT_EQ(*c.sharding.output_dtype, c10::kFloat);
  EXPECT_FALSE(c.sharding.cast_forward_inputs);
  EXPECT_EQ(c.sharding.num_to_forward_prefetch, 1);
  EXPECT_EQ(c.sharding.num_to_backward_prefetch, 2);
  EXPECT_FALSE(c.wrap.wrap_default_module_classes);  // a MindSpeed file wraps only what it names
}

TEST(FSDP2ConfigYaml, DefaultsForAbsentKeys) {
  FSDP2Config defaults;
  defaults.sharding.param_dtype = c10::kBFloat16;
  auto c = parse_fsdp2_config("reshard_after_forward: true\n", "cfg.yaml", defaults);
  EXPECT_EQ(*c.sharding.param_dtype, c10::kBFloat16);
  EXPECT_EQ(c.sharding_size, -1);
  EXPECT_TRUE(parse_fsdp2_config("", "empty.yaml").wrap.sub_modules_to_wrap.empty());
  // Keys both styles share do not make a file ROLL-style.
  EXPECT_FALSE(parse_fsdp2_config("param_dtype: bf16\nreduce_dtype: fp32\n", "cfg.yaml").wrap.wrap_default_module_classes);
  EXPECT_TRUE(parse_fsdp2_config("reshard_after_forward: null\n", "cfg.yaml").sharding.reshard_after_forward);
}

TEST(FSDP2ConfigYaml, ErrorsNameTheFileAndKey) {
  EXPECT_NE(error_of("shard_size: 2").find("cfg.yaml:1: key 'shard_size': unknown key"), std::string::npos);
  EXPECT_NE(error_of("param_dtype: int8").find("key 'param_dtype': unknown dtype 'int8'"), std::string::npos);
  EXPECT_NE(error_of("reshard_after_forward: maybe").find("key 'reshard_after_forward': expected true or false"), std::string::npos);
  EXPECT_NE(error_of("num_to_forward_prefetch: -1").find("key 'num_to_forward_prefetch': must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("sharding_size: [1]").find("key 'sharding_size': expected an integer"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b").find("cfg.yaml:1: expected a mapping of fsdp2 keys, got a list"), std::string::npos);
  EXPECT_NE(error_of("a: [").find("cfg.yaml: not valid YAML"), std::string::npos);
}

// Nothing in a config is silently dropped or taken from somewhere unsaid, and every type error
// says where it is.
TEST(FSDP2ConfigYaml, DuplicateKeysExtraDocumentsAndTypeErrorsNameTheLine) {
  const std::string twice = error_of("param_dtype: bf16\nreshard_after_forward: true\nparam_dtype: fp32\n");
  EXPECT_NE(twice.find("cfg.yaml:3: key 'param_dtype': given twice (first at cfg.yaml:1)"), std::string::npos) << twice;
  const std::string nested_twice = error_of("strategy_config:\n  fsdp_size: 2\n  fsdp_size: 4\n");
  EXPECT_NE(nested_twice.find("cfg.yaml:3: key 'strategy_config.fsdp_size': given twice"), std::string::npos) << nested_twice;
  const std::string wrap_twice = error_of("wrap_policy:\n  wrap_embeddings: true\n  wrap_embeddings: false\n");
  EXPECT_NE(wrap_twice.find("cfg.yaml:3: key 'wrap_policy.wrap_embeddings': given twice"), std::string::npos) << wrap_twice;

  const std::string documents = error_of("param_dtype: bf16\n---\nparam_dtype: fp32\n");
  EXPECT_NE(documents.find("cfg.yaml:3: a second YAML document"), std::string::npos) << documents;
  EXPECT_EQ(error_of("---\nparam_dtype: bf16\n"), "");  // one document with its marker

  const std::string list = error_of("param_dtype: bf16\nreduce_dtype: [fp32]\n");
  EXPECT_NE(list.find("cfg.yaml:2: key 'reduce_dtype': expected a dtype, got a list"), std::string::npos) << list;
  const std::string mapping = error_of("\n\nnum_to_forward_prefetch: {a: 1}\n");
  EXPECT_NE(mapping.find("cfg.yaml:3: key 'num_to_forward_prefetch': expected an integer, got a mapping"), std::string::npos)
      << mapping;
  const std::string dtype = error_of("\nparam_dtype: int8\n");
  EXPECT_NE(dtype.find("cfg.yaml:2: key 'param_dtype': unknown dtype 'int8'"), std::string::npos) << dtype;
  const std::string key = error_of("[a, b]: 1\n");
  EXPECT_NE(key.find("cfg.yaml:1: key '?': a key must be a name"), std::string::npos) << key;
}

TEST(FSDP2ConfigYaml, ADirectoryIsNotAConfig) {
  const auto dir = std::filesystem::temp_directory_path();
  try {
    load_fsdp2_config(dir.string(), {});
    FAIL() << "a directory was read as a config";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--fsdp2-config-path: '" + dir.string() + "' is a directory"), std::string::npos)
        << e.what();
  }
  try {
    load_fsdp2_config("/nonexistent/fsdp2.yaml");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--fsdp2-config-path: cannot read '/nonexistent/fsdp2.yaml'"), std::string::npos);
  }
}

TEST(RollStrategyConfig, ReadsRollKeys) {
  auto c = parse_fsdp2_config(R"(
fsdp_size: 4
param_dtype: bf16
reduce_dtype: float32
reshard_after_forward: false
offload_policy: false
wrap_policy:
  transformer_layer_cls_to_wrap: LlamaDecoderLayer
  wrap_embeddings: true
  wrap_lm_output: true
  moe_experts: null
apply_expert_patch: false
apply_tiled_mlp: false
tiled_num_shards: 4
async_save_ckpt: false
ulysses_size: 1
)", "cfg.yaml");
  EXPECT_EQ(c.sharding_size, 4);
  EXPECT_EQ(*c.sharding.param_dtype, c10::kBFloat16);
  EXPECT_EQ(*c.sharding.reduce_dtype, c10::kFloat);
  EXPECT_FALSE(c.sharding.reshard_after_forward);
  EXPECT_EQ(c.wrap.module_classes_to_wrap, (Strings{"LlamaDecoderLayer"}));
  EXPECT_FALSE(c.wrap.wrap_default_module_classes);
  EXPECT_TRUE(c.wrap.wrap_embeddings);
  EXPECT_TRUE(c.wrap.wrap_lm_output);
  EXPECT_TRUE(c.wrap.sub_modules_to_wrap.empty());
  EXPECT_FALSE(c.async_save_ckpt);
  EXPECT_TRUE(parse_fsdp2_config("async_save_ckpt: true\n", "cfg.yaml").async_save_ckpt);
  EXPECT_TRUE(parse_fsdp2_config("strategy_config:\n  async_save_ckpt: true\n", "cfg.yaml").async_save_ckpt);

  // ROLL's MoE keys: experts wrapped by class, and the patch that runs every expert.
  EXPECT_TRUE(c.wrap.expert_classes_to_wrap.empty());
  EXPECT_FALSE(c.wrap.apply_expert_patch);
  const FSDP2Config moe = parse_fsdp2_config(
      "strategy_config:\n  wrap_policy:\n    moe_experts: Qwen3MoeMLP\n  apply_expert_patch: true\n", "cfg.yaml");
  EXPECT_EQ(moe.wrap.expert_classes_to_wrap, (Strings{"Qwen3MoeMLP"}));
  EXPECT_TRUE(moe.wrap.apply_expert_patch);
  EXPECT_TRUE(moe.wrap.wrap_default_module_classes) << "and the decoder layers, as ROLL";

  // Without transformer_layer_cls_to_wrap ROLL wraps the model's decoder layer classes.
  EXPECT_TRUE(parse_fsdp2_config("fsdp_size: 2\n", "cfg.yaml").wrap.wrap_default_module_classes);
  EXPECT_TRUE(parse_fsdp2_config("wrap_policy:\n  wrap_embeddings: true\n", "cfg.yaml").wrap.wrap_default_module_classes);
  EXPECT_TRUE(parse_fsdp2_config("strategy_config:\n", "cfg.yaml").wrap.wrap_default_module_classes);
  // ... unless the file names modules by path.
  EXPECT_FALSE(parse_fsdp2_config("fsdp_size: 2\nsub_modules_to_wrap: [norm]\n", "cfg.yaml").wrap.wrap_default_module_classes);
}

// ROLL's model_args.freeze_module_prefix, beside either form of the strategy keys: a
// comma-separated string (ROLL splits it) or a list.
TEST(RollStrategyConfig, ReadsModelArgsFreezePrefixes) {
  EXPECT_EQ(parse_fsdp2_config("model_args:\n  freeze_module_prefix: vision_tower, layers.0\nsharding_size: 2\n", "cfg.yaml")
                .freeze_module_prefix,
            (Strings{"vision_tower", "layers.0"}));
  EXPECT_EQ(parse_fsdp2_config("model_args:\n  freeze_module_prefix: [a, b]\nstrategy_args:\n  strategy_name: fsdp2_train\n"
                               "  strategy_config:\n    fsdp_size: 2\n",
                               "cfg.yaml")
                .freeze_module_prefix,
            (Strings{"a", "b"}));
  EXPECT_EQ(parse_fsdp2_config("strategy_config:\n  fsdp_size: 2\nmodel_args:\n  freeze_module_prefix: a\n", "cfg.yaml")
                .freeze_module_prefix,
            (Strings{"a"}));
  EXPECT_EQ(error_of("model_args:\n  model_name_or_path: x\n"),
            "cfg.yaml:2: key 'model_args.model_name_or_path': unknown key (megacpp reads freeze_module_prefix and ulysses_size from model_args; "
            "the model itself comes from the flags)");
  EXPECT_EQ(error_of("strategy_config:\n  model_args: {freeze_module_prefix: a}\n").find("cfg.yaml:2: key 'strategy_config.model_args': unknown key"), 0u);
}

TEST(RollStrategyConfig, ReadsStrategyNesting) {
  const std::string keys = "fsdp_size: 2\nparam_dtype: bf16\nwrap_policy:\n  transformer_layer_cls_to_wrap: [LlamaDecoderLayer]\n";
  auto indent = [](const std::string& text, const std::string& pad) {
    std::string out = pad;
    for (size_t i = 0; i < text.size(); ++i) out += text[i] == '\n' && i + 1 < text.size() ? "\n" + pad : std::string(1, text[i]);
    return out;
  };
  const FSDP2Config flat = parse_fsdp2_config(keys, "cfg.yaml");
  const FSDP2Config under_config = parse_fsdp2_config("strategy_config:\n" + indent(keys, "  "), "cfg.yaml");
  const FSDP2Config under_args = parse_fsdp2_config(
      "strategy_args:\n  strategy_name: fsdp2_train\n  strategy_config:\n" + indent(keys, "    "), "cfg.yaml");
  EXPECT_EQ(flat.sharding_size, 2);
  EXPECT_TRUE(flat == under_config) << describe(flat) << "\n" << describe(under_config);
  EXPECT_TRUE(flat == under_args) << describe(flat) << "\n" << describe(under_args);
  EXPECT_TRUE(flat == parse_fsdp2_config("strategy_name: fsdp2_infer\nstrategy_config:\n" + indent(keys, "  "), "cfg.yaml"));

  // Errors inside the nesting name the key by its path.
  EXPECT_NE(error_of("strategy_args:\n  strategy_config:\n    fsdp_size: x\n")
                .find("cfg.yaml:3: key 'strategy_args.strategy_config.fsdp_size': expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_args:\n  strategy_name: megatron_train\n  strategy_config: {}\n")
                .find("key 'strategy_args.strategy_name': megacpp reads FSDP2 strategies only"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_args:\n  strategy_name: fsdp2_train\n").find("key 'strategy_args.strategy_config': missing"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_args:\n  strategy_config: {}\nfsdp_size: 2\n").find("key 'fsdp_size': not allowed beside strategy_args"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_config: {}\nfsdp_size: 2\n").find("key 'fsdp_size': not allowed beside strategy_config"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_config: [1]\n").find("key 'strategy_config': expected a mapping"), std::string::npos);
}

TEST(RollStrategyConfig, OneSettingInBothSpellingsIsAnError) {
  const std::string both_sizes = error_of("sharding_size: 2\nfsdp_size: 2\n");
  EXPECT_NE(both_sizes.find("cfg.yaml:2: key 'fsdp_size': also given as 'sharding_size'"), std::string::npos) << both_sizes;
  const std::string both_wraps = error_of("sub_modules_to_wrap: ['layers.{*}']\nwrap_policy:\n  wrap_embeddings: true\n");
  EXPECT_NE(both_wraps.find("cfg.yaml:2: key 'wrap_policy': also given as 'sub_modules_to_wrap'"), std::string::npos) << both_wraps;
  const std::string nested = error_of("strategy_config:\n  fsdp_size: 2\n  sharding_size: 2\n");
  EXPECT_NE(nested.find("key 'strategy_config.fsdp_size': also given as 'strategy_config.sharding_size'"), std::string::npos) << nested;
  // Different settings of the two styles may be combined.
  auto c = parse_fsdp2_config("fsdp_size: 2\nnum_to_forward_prefetch: 1\nrecompute_modules: ['layers.{*}']\n", "cfg.yaml");
  EXPECT_EQ(c.sharding.num_to_forward_prefetch, 1);
  EXPECT_EQ(c.recompute.recompute_modules, (Strings{"layers.{*}"}));
}

// ROLL's long-sequence keys: ulysses_size under model_args or strategy_config (the same value if
// both), apply_tiled_mlp with tiled_num_shards (ROLL's default 4).
TEST(RollStrategyConfig, ReadsUlyssesAndTiledMlp) {
  auto c = parse_fsdp2_config("model_args:\n  ulysses_size: 2\nstrategy_config:\n  fsdp_size: 4\n  apply_tiled_mlp: true\n",
                              "cfg.yaml");
  EXPECT_EQ(c.ulysses_size, 2);
  EXPECT_TRUE(c.tiled_mlp.apply_tiled_mlp);
  EXPECT_EQ(c.tiled_mlp.tiled_num_shards, 4);
  c = parse_fsdp2_config("model_args:\n  ulysses_size: 2\nstrategy_config:\n  ulysses_size: 2\n  tiled_num_shards: 8\n", "cfg.yaml");
  EXPECT_EQ(c.ulysses_size, 2);
  EXPECT_FALSE(c.tiled_mlp.apply_tiled_mlp);
  EXPECT_EQ(c.tiled_mlp.tiled_num_shards, 8);
  EXPECT_EQ(parse_fsdp2_config("ulysses_size: 4\n", "cfg.yaml").ulysses_size, 4);
  EXPECT_EQ(error_of("model_args:\n  ulysses_size: 2\nstrategy_config:\n  ulysses_size: 4\n"),
            "cfg.yaml:4: key 'strategy_config.ulysses_size': is 4 but model_args.ulysses_size (cfg.yaml:2) is 2; keep one of them");
}

TEST(RollStrategyConfig, UnimplementedFeaturesAreRefusedByName) {
  struct Case {
    std::string yaml, key;
  };
  const std::vector<Case> cases = {
      {"moe_modules:\n  - model.language_model.layers.{*}.mlp.experts\n", "moe_modules"},
  };
  for (const auto& c : cases) {
    const std::string error = error_of(c.yaml);
    EXPECT_EQ(error.rfind("cfg.yaml:", 0), 0u) << error;
    EXPECT_NE(error.find(": key '" + c.key + "': not supported in megacpp"), std::string::npos)
        << c.yaml << " -> " << error;
  }
  // Their defaults (and false / null / empty) are accepted.
  for (const std::string yaml : {"offload_policy: false\napply_expert_patch: false\napply_tiled_mlp: false\n"
                                 "async_save_ckpt: false\nulysses_size: 1\ntiled_num_shards: 4\n",
                                 "tiled_num_shards: 1\nwrap_policy:\n  moe_experts: []\n",
                                 "offload_policy: null\nwrap_policy:\n  moe_experts: null\n"}) {
    EXPECT_EQ(error_of(yaml), "") << yaml;
  }
  EXPECT_NE(error_of("ulysses_size: 0\n").find("key 'ulysses_size': must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("tiled_num_shards: 0\n").find("key 'tiled_num_shards': must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("model_args:\n  ulysses_size: -2\n").find("key 'model_args.ulysses_size': must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("offload_policy: {pin_memory: true}\n").find("key 'offload_policy': expected true or false"), std::string::npos);
}

TEST(RollStrategyConfig, WrapPolicyErrors) {
  EXPECT_NE(error_of("wrap_policy:\n  transformer_layer_cls_to_wrap: []\n")
                .find("key 'wrap_policy.transformer_layer_cls_to_wrap': expected a non-empty list"),
            std::string::npos);
  EXPECT_NE(error_of("wrap_policy:\n  wrap_layers: true\n").find("key 'wrap_policy.wrap_layers': unknown key"), std::string::npos);
  EXPECT_NE(error_of("wrap_policy: [LlamaDecoderLayer]\n").find("key 'wrap_policy': expected a mapping"), std::string::npos);
  EXPECT_NE(error_of("wrap_policy:\n  wrap_embeddings: yes please\n").find("key 'wrap_policy.wrap_embeddings': expected true or false"),
            std::string::npos);
}

// MindSpeed's fsdp2_config.yaml as its users write it: sharding_size auto, Hugging Face's module
// paths (model.layers.{*}), class paths, and MindSpeed's other keys with their meaning or a reason.
TEST(FSDP2ConfigYaml, MindSpeedFilesAsWritten) {
  EXPECT_EQ(parse_fsdp2_config("sharding_size: auto\n", "cfg.yaml").sharding_size, -1);
  EXPECT_EQ(error_of("offload_to_cpu: false\npin_memory: true\nuse_reentrant: false\nalign_fsdp_param_groups: false\n"
                     "expert_parallel_size: 1\nreshard_local_experts: true\nmoe_modules: null\n"),
            "");
  auto offload = parse_fsdp2_config("offload_to_cpu: True\npin_memory: false\n", "cfg.yaml");
  EXPECT_TRUE(offload.sharding.offload_to_cpu);
  EXPECT_FALSE(offload.sharding.pin_memory);
  EXPECT_TRUE(parse_fsdp2_config("strategy_args:\n  strategy_config:\n    offload_policy: true\n", "cfg.yaml").sharding.offload_to_cpu);
  EXPECT_NE(error_of("align_fsdp_param_groups: true\n").find("key 'align_fsdp_param_groups': not supported"), std::string::npos);
  EXPECT_NE(error_of("expert_parallel_size: 2\n").find("key 'expert_parallel_size': not supported"), std::string::npos);
  EXPECT_NE(error_of("reshard_after_forward: 2\n").find("key 'reshard_after_forward': an integer (reshard to 2 ranks after forward) is not supported"),
            std::string::npos);
  auto model = small_llama(false);
  const auto config = parse_fsdp2_config(
      "sharding_size: auto\nsub_modules_to_wrap:\n  - transformers.models.llama.modeling_llama.LlamaDecoderLayer\n  - lm_head\n"
      "recompute_modules: ['model.layers.{*}']\n",
      "cfg.yaml");
  EXPECT_EQ(model->resolve_module_classes(config.wrap).sub_modules_to_wrap, (Strings{"layers.{*}", "lm_head"}));
  EXPECT_EQ(models::parallelize(*model, single_mesh(), parallelize_settings(config)).wrap_paths,
            (Strings{"layers.0", "layers.1", "lm_head"}));
  try {
    models::parallelize(*small_llama(), single_mesh(),
                        parallelize_settings(parse_fsdp2_config("sub_modules_to_wrap: [mindspeed_mm.models.VideoDiTBlock]\n", "c")));
    ADD_FAILURE() << "an unknown class was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sub_modules_to_wrap: 'mindspeed_mm.models.VideoDiTBlock' is not a module class of this "
                                         "model (known: LlamaDecoderLayer)"),
              std::string::npos)
        << e.what();
  }
}

TEST(RollStrategyConfig, ClassNamesResolveAgainstTheModel) {
  auto tied = small_llama(true), untied = small_llama(false);
  auto roll = parse_fsdp2_config("wrap_policy:\n  transformer_layer_cls_to_wrap: [LlamaDecoderLayer]\n  wrap_embeddings: true\n"
                                 "  wrap_lm_output: true\n", "cfg.yaml");
  auto resolved = resolved_by(*untied, roll);
  EXPECT_EQ(resolved.wrap.sub_modules_to_wrap, (Strings{"embed_tokens", "layers.{*}", "lm_head"}));
  EXPECT_TRUE(resolved.wrap.module_classes_to_wrap.empty());
  EXPECT_FALSE(resolved.wrap.wrap_embeddings || resolved.wrap.wrap_lm_output || resolved.wrap.wrap_default_module_classes);
  EXPECT_EQ(models::parallelize(*untied, single_mesh(), parallelize_settings(roll)).wrap_paths,
            (Strings{"embed_tokens", "layers.0", "layers.1", "lm_head"}));

  // ROLL's default: the model's decoder layers.
  EXPECT_EQ(tied->resolve_module_classes(parse_fsdp2_config("fsdp_size: 2\n", "cfg.yaml").wrap).sub_modules_to_wrap,
            (Strings{"layers.{*}"}));

  auto error_of_resolving = [](models::LlamaModel& model, const std::string& yaml) -> std::string {
    try {
      models::parallelize(model, single_mesh(), parallelize_settings(parse_fsdp2_config(yaml, "cfg.yaml")));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const std::string no_experts = error_of_resolving(*small_llama(), "wrap_policy:\n  moe_experts: [Qwen3MoeMLP]\n");
  EXPECT_NE(no_experts.find("wrap_policy.moe_experts: 'Qwen3MoeMLP' is not an expert class of this model (known: none: it "
                            "has no mixture-of-experts layers)"),
            std::string::npos)
      << no_experts;
  const std::string unknown = error_of_resolving(*small_llama(), "wrap_policy:\n  transformer_layer_cls_to_wrap: [Qwen3DecoderLayer]\n");
  EXPECT_NE(unknown.find("wrap_policy.transformer_layer_cls_to_wrap: 'Qwen3DecoderLayer' is not a module class of this "
                         "model (known: LlamaDecoderLayer)"),
            std::string::npos)
      << unknown;
  const std::string lm_output = error_of_resolving(*small_llama(true), "wrap_policy:\n  wrap_lm_output: true\n");
  EXPECT_NE(lm_output.find("wrap_lm_output: this model has no output layer module of its own"), std::string::npos) << lm_output;
  const std::string embeddings = error_of_resolving(*small_llama(true), "wrap_policy:\n  wrap_embeddings: true\n");
  EXPECT_NE(embeddings.find("'embed_tokens' cannot be its own group while embeddings and output weights are tied"),
            std::string::npos)
      << embeddings;
}

std::string config_dir() { return std::string(MEGACPP_SOURCE_DIR) + "/configs/fsdp2"; }

Strings yaml_files_in(const std::string& dir) {
  Strings names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// A small LLaVA model: a 2-layer CLIP tower before small_llama.
std::shared_ptr<models::LanguageModel> small_llava() {
  models::LlavaSettings settings;
  settings.vision.hidden_size = 8;
  settings.vision.intermediate_size = 16;
  settings.vision.num_layers = 2;
  settings.vision.num_heads = 2;
  settings.vision.image_size = 8;
  settings.vision.patch_size = 4;
  settings.vision_feature_layer = -1;
  settings.image_token_id = 31;
  return std::make_shared<models::LlavaModel>(settings, small_llama(), torch::TensorOptions());
}

// What every file in configs/fsdp2 says, once resolved against the model it is for, and the
// modules it wraps.
struct ShippedConfig {
  FSDP2Config resolved;
  std::shared_ptr<models::LanguageModel> (*model)() = [] { return std::shared_ptr<models::LanguageModel>(small_llama()); };
  Strings wrapped = {"layers.0", "layers.1"};
};

std::map<std::string, ShippedConfig> expected_configs() {
  std::map<std::string, ShippedConfig> expected;
  FSDP2Config layers;
  layers.wrap.sub_modules_to_wrap = {"layers.{*}"};
  layers.sharding.num_to_forward_prefetch = 1;
  layers.sharding.num_to_backward_prefetch = 1;
  expected["llama_layers.yaml"].resolved = layers;

  FSDP2Config roll = layers;
  roll.sharding.num_to_forward_prefetch = roll.sharding.num_to_backward_prefetch = 0;
  roll.sharding.param_dtype = roll.sharding.reduce_dtype = c10::kFloat;
  expected["roll_strategy.yaml"].resolved = roll;

  FSDP2Config hsdp;
  hsdp.sharding_size = 2;
  hsdp.wrap.sub_modules_to_wrap = {"layers.{*}"};
  hsdp.sharding.param_dtype = c10::kBFloat16;
  hsdp.sharding.reduce_dtype = c10::kFloat;
  expected["hsdp_bf16_roll.yaml"].resolved = hsdp;
  expected["hsdp_bf16_mindspeed.yaml"].resolved = hsdp;

  ShippedConfig& llava = expected["llava_frozen_tower.yaml"];
  llava.resolved.wrap.sub_modules_to_wrap = {"vision_tower.vision_model.encoder.layers.{*}", "language_model.layers.{*}"};
  llava.resolved.freeze_module_prefix = {"vision_tower"};
  llava.model = small_llava;
  llava.wrapped = {"vision_tower.vision_model.encoder.layers.0", "vision_tower.vision_model.encoder.layers.1",
                   "language_model.layers.0", "language_model.layers.1"};
  return expected;
}

TEST(RollStrategyConfig, EveryShippedConfigLoadsAndShardsTheModel) {
  const Strings files = yaml_files_in(config_dir());
  ASSERT_FALSE(files.empty()) << "no .yaml in " << config_dir();
  const auto expected = expected_configs();
  for (const auto& file : files) {
    SCOPED_TRACE(file);
    auto it = expected.find(file);
    ASSERT_NE(it, expected.end()) << "configs/fsdp2/" << file << " has no expectation in expected_configs()";
    const FSDP2Config loaded = load_fsdp2_config(config_dir() + "/" + file);
    auto model = it->second.model();
    const FSDP2Config resolved = resolved_by(*model, loaded);
    EXPECT_TRUE(resolved == it->second.resolved) << describe(resolved) << "\nexpected\n" << describe(it->second.resolved);
    EXPECT_EQ(models::parallelize(*model, single_mesh(), parallelize_settings(loaded)).wrap_paths, it->second.wrapped);
  }
  for (const auto& item : expected) {
    EXPECT_NE(std::find(files.begin(), files.end(), item.first), files.end()) << item.first << " is missing from configs/fsdp2";
  }
}

// cast_forward_inputs per wrapped module class: LLaVA's CLIP layers take their inputs as they
// come unless the YAML says otherwise; the rest take the config's.
TEST(RollStrategyConfig, CastForwardInputsPerModuleClass) {
  auto cast_of = [](models::LanguageModel& model, const std::string& path) {
    for (auto& [p, module] : parallel::named_hookable_modules(model)) {
      if (p == path) return parallel::fsdp::fsdp_state(*module)->options().mixed_precision.cast_forward_inputs;
    }
    ADD_FAILURE() << "no module " << path;
    return true;
  };
  const std::string wrap = "wrap_policy:\n  transformer_layer_cls_to_wrap: [CLIPEncoderLayer, LlamaDecoderLayer]\n";
  auto model = small_llava();
  models::parallelize(*model, single_mesh(), parallelize_settings(parse_fsdp2_config(wrap + "param_dtype: bf16\n", "cfg.yaml")));
  EXPECT_FALSE(cast_of(*model, "vision_tower.vision_model.encoder.layers.0")) << "the model's default for CLIPEncoderLayer";
  EXPECT_TRUE(cast_of(*model, "language_model.layers.1"));
  EXPECT_TRUE(cast_of(*model, ""));

  const FSDP2Config per_class = parse_fsdp2_config(wrap + "cast_forward_inputs:\n  default: false\n  CLIPEncoderLayer: true\n", "cfg.yaml");
  EXPECT_FALSE(per_class.sharding.cast_forward_inputs);
  EXPECT_EQ(per_class.sharding.cast_forward_inputs_by_class, (std::map<std::string, bool>{{"CLIPEncoderLayer", true}}));
  model = small_llava();
  models::parallelize(*model, single_mesh(), parallelize_settings(per_class));
  EXPECT_TRUE(cast_of(*model, "vision_tower.vision_model.encoder.layers.1")) << "the YAML over the model";
  EXPECT_FALSE(cast_of(*model, "language_model.layers.0"));
  EXPECT_FALSE(cast_of(*model, ""));

  try {
    models::parallelize(*small_llama(), single_mesh(),
                        parallelize_settings(parse_fsdp2_config("cast_forward_inputs:\n  CLIPEncoderLayer: false\n", "cfg.yaml")));
    ADD_FAILURE() << "a class the model does not have";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cast_forward_inputs: 'CLIPEncoderLayer' is not a module class of this model (known: "
                                         "LlamaDecoderLayer)"),
              std::string::npos)
        << e.what();
  }
  try {
    parse_fsdp2_config("cast_forward_inputs:\n  CLIPEncoderLayer: maybe\n", "cfg.yaml");
    ADD_FAILURE() << "not a boolean";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cast_forward_inputs.CLIPEncoderLayer"), std::string::npos) << e.what();
  }
}

TEST(RollStrategyConfig, RollAndMindSpeedFilesGiveTheSameConfig) {
  auto model = small_llama(false);
  auto resolve = [&](const std::string& yaml) { return resolved_by(*model, parse_fsdp2_config(yaml, "cfg.yaml")); };
  auto load = [&](const std::string& file) { return resolved_by(*model, load_fsdp2_config(config_dir() + "/" + file)); };
  struct Pair {
    FSDP2Config roll, mindspeed;
  };
  const std::vector<Pair> pairs = {
      {load("hsdp_bf16_roll.yaml"), load("hsdp_bf16_mindspeed.yaml")},
      {load("roll_strategy.yaml"), resolve("sub_modules_to_wrap: ['layers.{*}']\nparam_dtype: fp32\nreduce_dtype: fp32\n")},
      {resolve("strategy_args:\n  strategy_name: fsdp2_train\n  strategy_config:\n    fsdp_size: 4\n    param_dtype: bf16\n"
               "    reduce_dtype: float32\n    reshard_after_forward: false\n    wrap_policy:\n"
               "      transformer_layer_cls_to_wrap: [LlamaDecoderLayer]\n      wrap_embeddings: true\n"
               "      wrap_lm_output: true\n"),
       resolve("sharding_size: 4\nparam_dtype: bf16\nreduce_dtype: fp32\nreshard_after_forward: false\n"
               "sub_modules_to_wrap: [embed_tokens, 'layers.{*}', lm_head]\n")},
      {resolve("fsdp_size: 1\n"), resolve("sharding_size: 1\nsub_modules_to_wrap: ['layers.{*}']\n")},
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_TRUE(pairs[i].roll == pairs[i].mindspeed)
        << "pair " << i << "\n" << describe(pairs[i].roll) << "\n" << describe(pairs[i].mindspeed);
  }
}

}  // namespace
}  // namespace megacpp::settings
