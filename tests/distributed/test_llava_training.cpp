// LLaVA trained on image-text data: real photographs (Debian's dataset-fashion-mnist, through
// scripts/fashion_mnist_jsonl.py). The vision tower frozen (Megatron's --freeze-ViT) and wrapped
// per CLIP encoder layer: the same losses on 1 rank, FSDP on 2 and 4 ranks and HSDP; the tower
// bit for bit as initialized, no optimizer state for it; unfrozen it trains. The checkpoint
// exports to a folder transformers' LLaVA code (the NumPy reference) reads to the same logits,
// which imports back to train. Bad data is refused naming FILE:LINE. Images packed once by
// megacpp-preprocess train as the files do. scripts/vl_demo.sh
// captions held-out images well above chance.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::train;
using testing::TrainRun;

const std::string kLlavaModel =
    "--model-type llava --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 48 "
    "--untie-embeddings-and-output-weights --vision-num-layers 2 --vision-hidden-size 16 --vision-num-attention-heads 2 "
    "--img-h 28 --img-w 28 --patch-dim 14 --num-channels 1 --image-mean 0.286 --image-std 0.353 --seq-length 40 "
    "--tokenizer-type ByteLevelTokenizer --micro-batch-size 2 --global-batch-size 8 --train-iters 6 --log-interval 1 "
    "--eval-iters 0 --lr 1e-2 --seed 7 --init-method-std 0.2 --split 100,0,0 ";
const std::string kWrapPerBlock = "wrap_policy:\n  transformer_layer_cls_to_wrap: [CLIPEncoderLayer, LlamaDecoderLayer]\n";
constexpr int64_t kByteLevelImageToken = 383;  // the last id of ByteLevelTokenizer's 257 padded to 384

// The first images of Fashion-MNIST's splits as image-text JSON lines under `dir`.
std::string fashion_mnist(const std::string& dir, int train_images, int test_images) {
  const auto made = testing::run_command("/usr/bin/python3 " + std::string(MEGACPP_SOURCE_DIR) + "/scripts/fashion_mnist_jsonl.py " + dir +
                                         " --train " + std::to_string(train_images) + " --test " + std::to_string(test_images));
  EXPECT_EQ(made.status, 0) << made.output;
  return dir;
}

bool in_tower(const std::string& name) { return name.rfind("vision_tower.", 0) == 0; }

TEST(LlavaTraining, SameLossesOnEveryLayoutWithTheTowerFrozenAndWrappedPerBlock) {
  const std::string dir = testing::scratch_dir();
  const std::string data = " --data-path " + fashion_mnist(dir + "/fm", 64, 0) + "/train.jsonl";
  const std::string frozen = kLlavaModel + data + " --freeze-ViT";
  const TrainRun one = train(1, frozen + " --dump-final-params " + dir + "/one.pt");
  testing::expect_trained(one, 6);
  EXPECT_NE(one.result.output.find("image-text data: 64 lines of"), std::string::npos) << one.result.output;
  const std::string wrapped = testing::fsdp_flags(dir, "wrap.yaml", kWrapPerBlock);
  const std::string hsdp = testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\n" + kWrapPerBlock);
  const TrainRun two = train(2, frozen + wrapped);
  EXPECT_NE(two.result.output.find("sub_modules_to_wrap [vision_tower.vision_model.encoder.layers.{*}, language_model.layers.{*}]"),
            std::string::npos)
      << two.result.output;
  testing::expect_same_losses(one, two, "FSDP on 2 ranks, each CLIP and decoder layer a group", 1e-5);
  testing::expect_same_losses(one, train(4, frozen + wrapped + " --dump-final-params " + dir + "/four.pt"), "FSDP on 4 ranks", 1e-5);
  testing::expect_same_losses(one, train(4, frozen + hsdp), "HSDP 2x2", 1e-5);

  // The tower bit for bit as initialized (an --lr 0 run keeps the initial weights); the rest trained.
  ASSERT_EQ(train(1, frozen + " --lr 0 --dump-final-params " + dir + "/initial.pt").result.status, 0);
  const auto initial = testing::read_tensor_dict(dir + "/initial.pt"), trained = testing::read_tensor_dict(dir + "/one.pt");
  const auto sharded = testing::read_tensor_dict(dir + "/four.pt");
  int64_t trainable = 0;
  for (const auto& [name, tensor] : initial) {
    EXPECT_EQ(tensor.equal(trained.at(name)), in_tower(name)) << name;
    EXPECT_EQ(tensor.equal(sharded.at(name)), in_tower(name)) << name << " (FSDP on 4 ranks)";
    if (!in_tower(name)) trainable += tensor.numel();
  }
  ASSERT_FALSE(one.memory.empty()) << one.result.output;
  EXPECT_NEAR(one.memory[0].optimizer_state, 2.0 * trainable * 4 / (1024 * 1024), 1e-3) << "AdamW's moments of the trainable only";
  EXPECT_NEAR(one.memory[0].grads, 1.0 * trainable * 4 / (1024 * 1024), 1e-3) << "gradients of the trainable only";

  // Unfrozen, the tower's first layer trains (the second is past the feature layer, -2: never run,
  // as transformers discards it) and its optimizer state appears.
  const TrainRun unfrozen = train(1, kLlavaModel + data + " --dump-final-params " + dir + "/unfrozen.pt");
  testing::expect_trained(unfrozen, 6);
  ASSERT_FALSE(unfrozen.memory.empty()) << unfrozen.result.output;
  EXPECT_GT(unfrozen.memory[0].optimizer_state, one.memory[0].optimizer_state + 0.005);
  EXPECT_GT(unfrozen.memory[0].grads, one.memory[0].grads + 0.002);
  const auto moved = testing::read_tensor_dict(dir + "/unfrozen.pt");
  const std::string layer = "vision_tower.vision_model.encoder.layers.";
  EXPECT_FALSE(initial.at(layer + "0.mlp.fc1.weight").equal(moved.at(layer + "0.mlp.fc1.weight")));
  EXPECT_TRUE(initial.at(layer + "1.mlp.fc1.weight").equal(moved.at(layer + "1.mlp.fc1.weight")));
}

TEST(LlavaTraining, ExportIsTransformersLlavaAndImportsBackToTrain) {
  const std::string dir = testing::scratch_dir();
  const std::string data = " --data-path " + fashion_mnist(dir + "/fm", 32, 0) + "/train.jsonl";
  ASSERT_EQ(train(2, kLlavaModel + data + " --use-torch-fsdp2 --save " + dir + "/ckpt").result.status, 0);
  const auto exported = testing::convert("export --load " + dir + "/ckpt --output " + dir + "/hf");
  ASSERT_EQ(exported.status, 0) << exported.output;
  std::vector<std::vector<int64_t>> rows = {{kByteLevelImageToken, kByteLevelImageToken, kByteLevelImageToken, kByteLevelImageToken, 97, 32, 112, 104},
                                            {104, 105, kByteLevelImageToken, kByteLevelImageToken, kByteLevelImageToken, kByteLevelImageToken, 98, 10}};
  auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor pixels = torch::randn({2, 1, 28, 28}, generator, torch::kFloat);
  const at::Tensor ours = testing::checkpoint_logits(dir + "/ckpt", rows, nullptr, "", pixels);
  const double diff = (ours - testing::llava_reference_logits(dir + "/hf", rows, pixels, ours.size(2))).abs().max().item<double>();
  std::cout << "trained LLaVA, exported: max |megacpp - llava_forward.py| = " << diff << " (logits up to "
            << ours.abs().max().item<double>() << ")" << std::endl;
  EXPECT_LE(diff, 1e-4);

  const auto imported = testing::convert("import --input " + dir + "/hf --save " + dir + "/imported");
  ASSERT_EQ(imported.status, 0) << imported.output;
  const TrainRun resumed = train(2, kLlavaModel + data + " --use-torch-fsdp2 --train-iters 2 --load " + dir + "/imported");
  testing::expect_trained(resumed, 2);
  EXPECT_NE(resumed.result.output.find("model weights only"), std::string::npos) << resumed.result.output;
}

TEST(LlavaTraining, BadImageDataIsRefusedNamingFileAndLine) {
  const std::string dir = testing::scratch_dir();
  fashion_mnist(dir, 4, 0);
  std::ofstream(dir + "/broken.png") << "not a png";
  const std::string good = R"({"image": "images/train/00000.png", "text": "a photo of an ankle boot"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good + "\n{\"image\": \"images/train/00001.png\"\n", "bad.jsonl:2: not JSON"},
      {good + "\n" + R"({"image": "images/train/00001.png"})" + "\n", "bad.jsonl:2: no \"text\""},
      {R"({"image": "images/train/00001.png", "text": ""})" "\n", "bad.jsonl:1: \"text\" is empty"},
      {R"({"text": "a bag"})" "\n", "bad.jsonl:1: no \"image\""},
      {good + "\n\n" + R"({"image": "images/nope.png", "text": "a bag"})" + "\n", "bad.jsonl:3: the image " + dir + "/images/nope.png does not exist"},
      {R"({"image": "broken.png", "text": "a bag"})" "\n", "bad.jsonl:1: cannot decode the image " + dir + "/broken.png"},
      {R"({"image": "images/train/00001.png", "prompt": ")" + std::string(40, 'x') + R"(", "text": "a bag"})" "\n",
       "bad.jsonl:1: the image's 4 tokens and the prompt's 40 leave no text within --seq-length 40"},
  };
  for (const auto& [lines, message] : cases) {
    std::ofstream(dir + "/bad.jsonl") << lines;
    const TrainRun refused = train(2, kLlavaModel + " --use-torch-fsdp2 --train-iters 1 --data-path " + dir + "/bad.jsonl");
    EXPECT_NE(refused.result.status, 0) << lines;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << lines << "\n" << refused.result.output;
  }
  const TrainRun text_only = train(1, "--model-type llama --train-iters 1 --data-path " + dir + "/train.jsonl");
  EXPECT_NE(text_only.result.output.find("holds image-text samples, which --model-type llama cannot read"), std::string::npos)
      << text_only.result.output;
}

// megacpp-preprocess --pack-images decodes once; training on the packed lines reads the same
// pixels, so the losses are the same to the bit. A pack of another shape is refused by line.
TEST(LlavaTraining, PackedImagesTrainAsTheImageFilesDo) {
  const std::string dir = testing::scratch_dir();
  fashion_mnist(dir, 32, 0);
  const std::string preprocess = std::string(MEGACPP_PREPROCESS_BINARY) + " --pack-images --input " + dir + "/train.jsonl --output-prefix " +
                                 dir + "/packed/train --img-h 28 --img-w 28 --num-channels 1 --workers 2";
  const auto packed = testing::run_command(preprocess);
  ASSERT_EQ(packed.status, 0) << packed.output;
  EXPECT_NE(packed.output.find("Packed 32 images (28x28x1)"), std::string::npos) << packed.output;
  const TrainRun files = train(1, kLlavaModel + " --data-path " + dir + "/train.jsonl");
  const TrainRun from_pack = train(1, kLlavaModel + " --data-path " + dir + "/packed/train.jsonl");
  testing::expect_trained(files, 6);
  testing::expect_same_losses(files, from_pack, "packed images", 0.0);

  const TrainRun other_shape = train(1, kLlavaModel + " --num-channels 3 --data-path " + dir + "/packed/train.jsonl");
  EXPECT_NE(other_shape.result.output.find("train.jsonl:1: " + dir + "/packed/train.pixels holds 28x28x1 images; the model takes 28x28x3 "
                                           "(pack them again with --img-h 28 --num-channels 3)"),
            std::string::npos)
      << other_shape.result.output;
  const auto refused = testing::run_command(preprocess + " --append-eod");
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.output.find("--pack-images packs images only (the text is tokenized when training): drop --append-eod"),
            std::string::npos)
      << refused.output;
}

// The README's vision-language quickstart, as written: held-out caption accuracy well above
// the 10% of guessing the class.
TEST(LlavaTraining, VlDemoCaptionsHeldOutImagesWellAboveChance) {
  const std::string train_binary = MEGACPP_TRAIN_BINARY;
  const std::string build_dir = train_binary.substr(0, train_binary.rfind('/'));
  const auto result = testing::run_command("bash " + std::string(MEGACPP_SOURCE_DIR) + "/scripts/vl_demo.sh " + build_dir + " " +
                                           testing::scratch_dir());
  ASSERT_EQ(result.status, 0) << result.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(result.output, m, std::regex(R"(caption accuracy: ([0-9.]+)% \((\d+) of 2000 images)"))) << result.output;
  std::cout << m[0] << std::endl;
  EXPECT_GE(std::stod(m[1]), 50.0) << result.output;
}

}  // namespace
}  // namespace megacpp
