// Megatron's GPT model (models/gpt), what megacpp-train builds when a command line gives none of
// Megatron's architecture flags: the same losses on every layout, dropout (Megatron's 0.1 by
// default, off in validation, replayed by full and selective recompute), and the export to a Hugging Face GPT-2
// folder checked by an independent NumPy forward (tests/reference/gpt2_forward.py), imported back.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/gpt/gpt_config.h"
#include "models/registry.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::train;
using testing::expect_trained;
using testing::TrainRun;
using testing::fsdp_flags;

const std::string kGpt =
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 4 --seed 3 "
    "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 --seq-length 16 "
    "--micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 6";
const std::string kNoDropout = " --attention-dropout 0 --hidden-dropout 0";

TEST(GptFamily, MegatronsDefaultArchitectureGivesTheSameLossesOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const TrainRun one = train(1, kGpt + kNoDropout);
  expect_trained(one, 6);
  EXPECT_NE(one.result.output.find("megacpp-train | model gpt:"), std::string::npos) << one.result.output;
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the model does not learn";
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['h.{*}']\n");
  const std::string by_class = fsdp_flags(dir, "class.yaml", "wrap_policy:\n  transformer_layer_cls_to_wrap: [GPT2Block]\n");
  const std::string hsdp = fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['h.{*}']\n");
  testing::expect_same_losses(one, train(2, kGpt + kNoDropout + layers), "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kGpt + kNoDropout + by_class), "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, kGpt + kNoDropout + hsdp), "HSDP 2x2", 1e-5);
  testing::expect_same_losses(one, train(2, kGpt + kNoDropout + layers + " --init-model-with-meta-device"),
                              "meta-device init", 1e-5);
  // The output layer reads the token embedding: it cannot be a group of its own.
  const TrainRun tied = train(2, kGpt + fsdp_flags(dir, "wte.yaml", "sub_modules_to_wrap: ['h.{*}', wte]\n"));
  EXPECT_NE(tied.result.output.find("'wte' cannot be its own group"), std::string::npos) << tied.result.output;
}

TEST(GptFamily, DropoutActsInTrainingOnlyAndRecomputeReplaysIt) {
  // With --lr 0 the weights never change: the losses differ only by what dropout does.
  const std::string frozen = kGpt + " --lr 0 --eval-interval 3 --eval-iters 1";
  const TrainRun none = train(1, frozen + kNoDropout);
  const TrainRun dropped = train(1, frozen);  // Megatron's defaults: 0.1 and 0.1
  expect_trained(none, 6);
  expect_trained(dropped, 6);
  double largest = 0;
  for (size_t i = 0; i < 6; ++i) largest = std::max(largest, std::abs(none.losses[i] - dropped.losses[i]));
  EXPECT_GT(largest, 1e-3) << "dropout changed no training loss\n" << dropped.result.output;
  // Validation runs the model without dropout.
  ASSERT_FALSE(none.validation.empty()) << none.result.output;
  testing::expect_same_losses(TrainRun{none.result, {}, none.validation, {}}, TrainRun{dropped.result, {}, dropped.validation, {}},
                              "validation with and without dropout", 1e-6);

  // Recompute draws the same dropout masks again: the same gradients, so the same losses.
  const std::string dir = testing::scratch_dir();
  const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['h.{*}']\n");
  const TrainRun plain = train(2, kGpt + layers);
  const TrainRun recomputed = train(2, kGpt + layers + " --recompute-granularity full --recompute-method uniform "
                                                       "--recompute-num-layers 1");
  expect_trained(plain, 6);
  EXPECT_NE(recomputed.result.output.find("recompute on h.0, h.1"), std::string::npos) << recomputed.result.output;
  testing::expect_same_losses(plain, recomputed, "recompute with dropout", 1e-6);
  // Selective recompute: the core attention alone, its attention dropout drawn again the same.
  const TrainRun selective = train(2, kGpt + layers + " --recompute-granularity selective");
  EXPECT_NE(selective.result.output.find("recompute on h.0.attn.core_attention, h.1.attn.core_attention"), std::string::npos)
      << selective.result.output;
  testing::expect_same_losses(plain, selective, "selective recompute with dropout", 1e-6);
}

TEST(GptFamily, ExportsAGpt2FolderTheNumpyForwardAgreesWithAndImportsBack) {
  struct Variant {
    std::string flags, activation;
    std::string imported_flags;  // Hugging Face's LayerNorm has no zero-centered form: imported, it is a plain one
  };
  for (const Variant& variant :
       {Variant{"", "gelu", ""}, Variant{" --openai-gelu --apply-layernorm-1p", "gelu_new", " --openai-gelu"}}) {
    SCOPED_TRACE(variant.activation);
    const std::string dir = testing::scratch_dir();
    const std::string layers = fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['h.{*}']\n");
    // Weights large enough that GeLU's two forms differ in the logits by more than the bound.
    const std::string flags = kGpt + variant.flags + layers + " --init-method-std 0.3";
    const TrainRun trained = train(2, flags + " --save " + dir + "/ckpt --save-interval 6 --ckpt-format torch_dcp");
    expect_trained(trained, 6);
    const std::string hf = dir + "/hf";
    const auto exported = testing::convert("export --load " + dir + "/ckpt --output " + hf);
    ASSERT_EQ(exported.status, 0) << exported.output;
    const nlohmann::json config = nlohmann::json::parse(testing::read_file(hf + "/config.json"));
    EXPECT_EQ(config["model_type"], "gpt2");
    EXPECT_EQ(config["activation_function"], variant.activation);
    EXPECT_EQ(config["resid_pdrop"], 0.1);
    EXPECT_EQ(config["attn_pdrop"], 0.1);

    const at::Tensor ours = testing::checkpoint_logits(dir + "/ckpt", testing::reference_tokens());
    const at::Tensor reference = testing::hf_reference_logits(hf, testing::reference_tokens(), ours.size(-1), "gpt2_forward.py");
    const double diff = (ours - reference).abs().max().item<double>();
    std::cout << variant.activation << ": max |megacpp - gpt2_forward.py| = " << diff << std::endl;
    EXPECT_LE(diff, 1e-4) << "max |megacpp - gpt2_forward.py| over the logits";

    const auto imported = testing::convert("import --input " + hf + " --save " + dir + "/imported");
    ASSERT_EQ(imported.status, 0) << imported.output;
    EXPECT_NE(imported.output.find("--model-type gpt --num-layers 2"), std::string::npos) << imported.output;
    const TrainRun resumed = train(2, kGpt + variant.imported_flags + layers + " --load " + dir + "/imported");
    expect_trained(resumed, 6);
    EXPECT_LT(resumed.losses.front(), trained.losses.front()) << "the imported weights are the trained ones";
  }
}

// GPT2LMHeadModel.save_pretrained writes "transformer.h.0..."; the original gpt2 files (a
// GPT2Model's state) have no prefix. Both import; the mask buffers and the tied lm_head are skipped.
TEST(GptFamily, ReadsGpt2NamesWithAndWithoutTheTransformerPrefix) {
  const auto& family = models::model_family("gpt");
  const models::GptConfig config;
  EXPECT_EQ(family.from_hf_tensor(config, "transformer.h.0.attn.c_attn.weight"), "h.0.attn.c_attn.weight");
  EXPECT_EQ(family.from_hf_tensor(config, "h.0.attn.c_attn.weight"), "h.0.attn.c_attn.weight");
  EXPECT_EQ(family.from_hf_tensor(config, "wte.weight"), "wte.weight");
  EXPECT_EQ(family.from_hf_tensor(config, "h.3.attn.bias"), std::nullopt);
  EXPECT_EQ(family.from_hf_tensor(config, "transformer.h.3.attn.masked_bias"), std::nullopt);
  EXPECT_EQ(family.from_hf_tensor(config, "lm_head.weight"), std::nullopt);
  EXPECT_THROW(family.from_hf_tensor(config, "transformer.h.0.attn.q_proj.weight"), std::invalid_argument);
  const models::HfTensorName c_fc = family.to_hf_tensor(config, "h.1.mlp.c_fc.weight");
  EXPECT_EQ(c_fc.name, "transformer.h.1.mlp.c_fc.weight");
  EXPECT_TRUE(c_fc.transposed) << "GPT-2's Conv1D stores [in, out]";
  EXPECT_FALSE(family.to_hf_tensor(config, "h.1.mlp.c_fc.bias").transposed);
}

}  // namespace
}  // namespace megacpp
