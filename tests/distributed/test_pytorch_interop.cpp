// megacpp and PyTorch 2.x's torch.distributed.checkpoint read each other's checkpoints. The
// checkpoint PyTorch 2.6 wrote (tests/fixtures/dcp_pytorch2) loads bit for bit on any world
// size and trains; where PyTorch 2.x is at hand (scripts/setup_pytorch2.sh), dcp.load reads
// megacpp's checkpoints, a fresh output of the fixture's script loads too, and the safetensors
// library reads megacpp-convert's exports.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/dcp_io.h"
#include "io/serialization/safetensors.h"
#include "tests/support/pytorch2.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using testing::TrainRun;

const std::string kFixtureDir = MEGACPP_SOURCE_DIR "/tests/fixtures/dcp_pytorch2";
const std::string kFixture = kFixtureDir + "/checkpoint";
// The model make_fixture.py trains (uneven shards on 2 ranks: 51 vocabulary and 45 ffn rows).
const std::string kFixtureModel =
    "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 50 --make-vocab-size-divisible-by 1 --num-layers 2 "
    "--hidden-size 24 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 45 --seq-length 16 "
    "--max-position-embeddings 16 --micro-batch-size 1 --global-batch-size 6 --lr 1e-3 "
    "--untie-embeddings-and-output-weights --log-interval 1 --eval-iters 1 --eval-interval 100 --use-torch-fsdp2";

// make_fixture.py's expected.safetensors: every tensor of the checkpoint in full, under its DCP key.
std::map<std::string, at::Tensor> read_expected(const std::string& path) {
  const auto file = io::serialization::SafetensorsFile::open(path);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& name : file.names()) {
    const auto view = file.tensor(name);
    EXPECT_EQ(view.dtype, "F32") << name;
    tensors[name] = at::from_blob(const_cast<uint8_t*>(view.data), view.shape, at::kFloat).clone();
  }
  return tensors;
}

// Loads the checkpoint under `root` (iteration 2) on `ranks` ranks and saves it to `out`
// without training.
void resave(const std::string& root, const std::string& out, int ranks, const std::string& format) {
  TrainRun run = testing::train(ranks, kFixtureModel + " --load " + root + " --train-iters 2 --save " + out + " --ckpt-format " + format);
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("resuming at iteration 2 (12 training"), std::string::npos) << run.result.output;
}

// Loads the checkpoint under `root` on `ranks` ranks and saves it again as torch_dcp (after
// `via_torch_dist` ranks saved it as torch_dist in between, when given): every weight, AdamW
// moment and step must come back bit for bit.
void expect_loads_exactly(const std::string& root, const std::string& expected_path, int ranks, int via_torch_dist = 0) {
  const std::string dir = testing::scratch_dir(), out = dir + "/resaved";
  if (via_torch_dist > 0) {
    resave(root, dir + "/torch_dist", via_torch_dist, "torch_dist");
    resave(dir + "/torch_dist", out, ranks, "torch_dcp");
  } else {
    resave(root, out, ranks, "torch_dcp");
  }
  const auto expected = read_expected(expected_path);
  ASSERT_GT(expected.size(), 80u);
  const checkpoint::DcpReader resaved(out + "/iter_0000002");
  for (const auto& [key, tensor] : expected) {
    ASSERT_TRUE(resaved.has(key)) << ranks << " ranks: " << key;
    EXPECT_TRUE(resaved.read_tensor(key).equal(tensor)) << ranks << " ranks: " << key;
  }
}

TEST(PytorchCheckpoint, FixtureWrittenByPytorch2LoadsExactlyOnAnyWorldSize) {
  for (int ranks : {2, 3, 1}) expect_loads_exactly(kFixture, kFixture + "/expected.safetensors", ranks);
  // Converted to torch_dist on 3 ranks and back to torch_dcp on 2: still PyTorch's values.
  expect_loads_exactly(kFixture, kFixture + "/expected.safetensors", 2, /*via_torch_dist=*/3);
  // The independent reader (Debian's torch 1.13) parses PyTorch 2.6's files too.
  auto listed = testing::run_command(testing::reference_script("dcp_reader.py") + " " + kFixture + "/iter_0000002");
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_NE(listed.output.find("model.embed_tokens.weight float32 [51, 24]"), std::string::npos) << listed.output;
}

TEST(PytorchCheckpoint, TrainsFromTheFixture) {
  const std::string flags = kFixtureModel + " --load " + kFixture + " --train-iters 5";
  TrainRun two = testing::train(2, flags);
  ASSERT_EQ(two.result.status, 0) << two.result.output;
  ASSERT_EQ(two.losses.size(), 3u) << two.result.output;
  for (double loss : two.losses) EXPECT_TRUE(std::isfinite(loss) && loss > 0 && loss < 4.5) << two.result.output;
  // On 3 ranks the shards cut PyTorch's chunks differently: the same losses within 1e-5.
  TrainRun three = testing::train(3, flags);
  ASSERT_EQ(three.result.status, 0) << three.result.output;
  testing::expect_same_losses(two, three, "3 ranks", 1e-5);
}

TEST(Pytorch2, DcpLoadReadsMegacppCheckpoints) {
  MEGACPP_REQUIRE_PYTORCH2(torch2);
  const std::string dir = torch2->scratch_dir();
  fs::copy_file(MEGACPP_SOURCE_DIR "/tests/reference/pytorch2_dcp_check.py", dir + "/check.py");
  // FSDP2 over 3 ranks (uneven rows), and TP 2 x FSDP 2 (blocks of TP slices at offsets in dim 0 and 1).
  std::string tensor_parallel = kFixtureModel + " --tensor-model-parallel-size 2";
  tensor_parallel.replace(tensor_parallel.find("--ffn-hidden-size 45"), 20, "--ffn-hidden-size 46");
  for (const auto& [name, ranks, flags] : std::vector<std::tuple<std::string, int, std::string>>{
           {"fsdp3", 3, kFixtureModel}, {"tp2-fsdp2", 4, tensor_parallel}}) {
    const std::string run_dir = dir + "/" + name;
    TrainRun run = testing::train(ranks, flags + " --train-iters 3 --save " + run_dir + "/ckpt --ckpt-format torch_dcp "
                                              "--dump-final-params " + run_dir + "/final.pt");
    ASSERT_EQ(run.result.status, 0) << run.result.output;
    auto checked = torch2->python(torch2->inside(dir + "/check.py") + " " + torch2->inside(run_dir + "/ckpt/iter_0000003") + " " +
                                  torch2->inside(run_dir + "/final.pt") + " " + std::to_string(ranks) + " 3");
    EXPECT_EQ(checked.status, 0) << name << "\n" << checked.output;
    EXPECT_NE(checked.output.find("pytorch2 checks passed"), std::string::npos) << name << "\n" << checked.output;
  }
  fs::remove_all(dir);
}

TEST(Pytorch2, FixtureScriptWritesACheckpointMegacppLoads) {
  MEGACPP_REQUIRE_PYTORCH2(torch2);
  const std::string dir = torch2->scratch_dir();
  fs::copy_file(kFixtureDir + "/make_fixture.py", dir + "/make_fixture.py");
  auto made = torch2->python(torch2->inside(dir + "/make_fixture.py") + " " + torch2->inside(dir + "/fixture"));
  ASSERT_EQ(made.status, 0) << made.output;
  expect_loads_exactly(dir + "/fixture", dir + "/fixture/expected.safetensors", 2);
  fs::remove_all(dir);
}

// Hugging Face's safetensors library (as transformers reads weights) reads megacpp-convert's
// folders: sharded fp32 with its index, and bf16.
TEST(Pytorch2, SafetensorsLibraryReadsExportedFolders) {
  MEGACPP_REQUIRE_PYTORCH2(torch2);
  const std::string dir = torch2->scratch_dir();
  TrainRun run = testing::train(2, kFixtureModel + " --train-iters 1 --save " + dir + "/ckpt --dump-final-params " + dir + "/final.pt");
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  fs::copy_file(MEGACPP_SOURCE_DIR "/tests/reference/pytorch2_hf_check.py", dir + "/check.py");
  for (const auto& [folder, options, dtype] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"hf32", " --max-shard-size 20000", "float32"}, {"hf16", " --dtype bfloat16", "bfloat16"}}) {
    auto exported = testing::convert("export --load " + dir + "/ckpt --output " + dir + "/" + folder + options);
    ASSERT_EQ(exported.status, 0) << exported.output;
    auto checked = torch2->python(torch2->inside(dir + "/check.py") + " " + torch2->inside(dir + "/" + folder) + " " +
                                  torch2->inside(dir + "/final.pt") + " " + dtype);
    EXPECT_EQ(checked.status, 0) << folder << "\n" << checked.output;
    EXPECT_NE(checked.output.find("hf checks passed"), std::string::npos) << checked.output;
  }
  EXPECT_TRUE(fs::exists(dir + "/hf32/model.safetensors.index.json")) << "20000-byte shards";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megacpp
