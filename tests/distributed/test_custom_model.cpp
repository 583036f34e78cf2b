// A model family built outside megacpp (examples/custom_model, GPT-2 style) against an
// installed megacpp: `cmake --install`, find_package(megacpp), then trained by its own
// executable and by the stock megacpp-train --model-library, on every layout (tensor parallelism
// through its own hooks included), saved, resumed, exported to a Hugging Face GPT2LMHeadModel
// folder (checked by tests/reference/gpt2_forward.py) and imported back.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <torch/torch.h>

#include "checkpoint/checkpoint_reader.h"
#include "models/registry.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

const std::string kGpt2 =
    "--model-type gpt2 --mock-data --tokenizer-type NullTokenizer --vocab-size 103 --make-vocab-size-divisible-by 4 "
    "--seed 3 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --micro-batch-size 2 "
    "--global-batch-size 8 --log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 4";

struct Example {
  std::string prefix;   // the megacpp install
  std::string train;    // examples/custom_model's gpt2-train
  std::string library;  // its libgpt2_family.so
};

// Installs this build tree under DIR/prefix and builds the example against it in DIR/example.
Example install_and_build_example(const std::string& dir) {
  Example e{dir + "/prefix", dir + "/example/gpt2-train", dir + "/example/libgpt2_family.so"};
  const std::string commands = "cmake --install " MEGACPP_BUILD_DIR " --prefix " + e.prefix + " > " + dir + "/install.log" +
                               " && cmake -S " MEGACPP_SOURCE_DIR "/examples/custom_model -B " + dir + "/example" +
                               " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + e.prefix + " && cmake --build " + dir +
                               "/example -j2 2>&1";
  const auto built = testing::run_command(commands);
  EXPECT_EQ(built.status, 0) << commands << "\n" << built.output;
  return e;
}

// megacpp's logits for reference_tokens() with the weights of checkpoint `root`, the model built by the
// family the library registered, from the exported config.json.
at::Tensor megacpp_logits(const std::string& root, const std::string& hf_dir) {
  std::ifstream config_file(hf_dir + "/config.json");
  const auto& family = models::model_family("gpt2");
  auto config = family.from_hf_config(nlohmann::json::parse(config_file), hf_dir + "/config.json");
  auto model = models::create_model(*config, torch::TensorOptions().dtype(torch::kFloat));
  auto reader = checkpoint::CheckpointReader::open(root, std::nullopt);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    item.value().copy_(reader->tensors().read_tensor(reader->format().model_key(item.key())));
  }
  return (*model)(testing::token_ids(testing::reference_tokens())).detach();
}

TEST(CustomModel, Gpt2BuiltOutsideTheTreeTrainsOnEveryLayoutExportsAndImports) {
  const std::string dir = testing::scratch_dir();
  const Example example = install_and_build_example(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());

  const auto one = testing::train_with(example.train, 1, kGpt2);
  ASSERT_EQ(one.result.status, 0) << one.result.output;
  ASSERT_EQ(one.losses.size(), 4u) << one.result.output;
  const std::string layers = testing::fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['h.{*}']\n");
  const std::string by_class = testing::fsdp_flags(dir, "class.yaml", "wrap_policy:\n  transformer_layer_cls_to_wrap: [GPT2Block]\n");
  const std::string hsdp = testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['h.{*}']\n");
  const std::string save = " --save " + dir + "/ckpt --save-interval 2 --ckpt-format torch_dcp";
  const auto two = testing::train_with(example.train, 2, kGpt2 + layers + save);
  testing::expect_same_losses(one, two, "FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train_with(example.train, 4, kGpt2 + by_class), "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, testing::train_with(example.train, 4, kGpt2 + hsdp), "HSDP 2x2", 1e-5);
  // Tensor parallelism through the family's own plan and sequence-parallel region (104 rows of
  // vocabulary: the same padding at TP 1 and 2).
  const std::string tp2 = " --tensor-model-parallel-size 2";
  testing::expect_same_losses(one, testing::train_with(example.train, 2, kGpt2 + tp2), "TP 2", 1e-5);
  testing::expect_same_losses(one, testing::train_with(example.train, 4, kGpt2 + layers + tp2 + " --sequence-parallel"),
                              "TP 2 x FSDP 2, sequence parallel", 1e-5);
  testing::expect_same_losses(one, testing::train_with(example.train, 2, kGpt2 + layers + " --init-model-with-meta-device"),
                              "meta-device init", 1e-5);

  // Resumed from iteration 2: iterations 3 and 4 bit for bit.
  const auto resumed = testing::train_with(example.train, 2, kGpt2 + layers + " --load " + dir + "/ckpt --ckpt-step 2");
  ASSERT_EQ(resumed.result.status, 0) << resumed.result.output;
  ASSERT_EQ(resumed.losses.size(), 2u) << resumed.result.output;
  EXPECT_EQ(resumed.losses[0], two.losses[2]);
  EXPECT_EQ(resumed.losses[1], two.losses[3]);

  // The stock megacpp-train, installed, with the family loaded from the library.
  const std::string stock = example.prefix + "/bin/megacpp-train --model-library " + example.library;
  testing::expect_same_losses(two, testing::train_with(stock, 2, kGpt2 + layers), "megacpp-train --model-library", 1e-5);

  // Export to GPT2LMHeadModel: the NumPy forward of transformers' GPT-2 gives megacpp's logits.
  const std::string convert = example.prefix + "/bin/megacpp-convert --model-library " + example.library;
  const std::string hf = dir + "/hf";
  auto exported = testing::run_command(convert + " export --load " + dir + "/ckpt --output " + hf);
  ASSERT_EQ(exported.status, 0) << exported.output;
  models::load_model_library(example.library);
  const at::Tensor ours = megacpp_logits(dir + "/ckpt", hf);
  const at::Tensor reference = testing::hf_reference_logits(hf, testing::reference_tokens(), ours.size(-1), "gpt2_forward.py");
  const double diff = (ours - reference).abs().max().item<double>();
  EXPECT_LE(diff, 1e-4) << "max |megacpp - gpt2_forward.py| over the logits";

  // ... and imported back, it trains. Two families read a GPT-2 folder (the library's and the
  // built-in gpt): megacpp-convert asks which.
  auto ambiguous = testing::run_command(convert + " import --input " + hf + " --save " + dir + "/imported 2>&1");
  EXPECT_NE(ambiguous.status, 0) << ambiguous.output;
  EXPECT_NE(ambiguous.output.find("\"gpt2\": read by --model-type gpt, gpt2: give --model-type to choose"), std::string::npos)
      << ambiguous.output;
  auto imported = testing::run_command(convert + " import --input " + hf + " --save " + dir + "/imported --model-type gpt2");
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_NE(imported.output.find("--model-type gpt2"), std::string::npos) << imported.output;
  const auto trained = testing::train_with(example.train, 2, kGpt2 + layers + " --load " + dir + "/imported");
  ASSERT_EQ(trained.result.status, 0) << trained.result.output;
  ASSERT_EQ(trained.losses.size(), 4u) << trained.result.output;
  EXPECT_LT(trained.losses.front(), one.losses.front()) << "the imported weights are the trained ones";
}

}  // namespace
}  // namespace megacpp
