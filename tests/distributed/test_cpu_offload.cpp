// FSDP2's CPU offload (offload_to_cpu / offload_policy): refused without a CUDA device, by the
// engine and by megacpp-train; where a GPU is present, a run with the shards in pinned host
// memory gives the losses of the same run with them on the device.
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "models/layers/linear.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/distributed_test.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

TEST(CpuOffload, TheEngineRefusesItWithoutCuda) {
  const parallel::DeviceMesh mesh = parallel::DeviceMesh::single();
  models::Linear layer(4, 4, false, torch::kFloat);
  parallel::fsdp::FullyShardOptions options;
  options.offload_to_cpu = true;
  try {
    parallel::fsdp::fully_shard(layer, mesh, options);
    ADD_FAILURE() << "offload to the CPU from the CPU must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fully_shard: CPU offload needs a CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CpuOffload, SameLossesWithShardsInHostMemoryOnAGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (this build or machine has none)";
  const std::string dir = testing::scratch_dir();
  const std::string flags =
      "--model-type llama --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 128 --mock-data "
      "--tokenizer-type NullTokenizer --vocab-size 99 --seq-length 32 --micro-batch-size 2 --global-batch-size 4 "
      "--train-iters 6 --eval-iters 0 --log-interval 1 --lr 1e-2 --seed 3 --use-torch-fsdp2";
  const testing::TrainRun on_device = testing::train(1, flags + testing::fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n"));
  const testing::TrainRun offloaded = testing::train(
      1, flags + testing::fsdp_flags(dir, "offload.yaml", "sub_modules_to_wrap: ['layers.{*}']\noffload_to_cpu: true\n"));
  testing::expect_trained(on_device, 6);
  EXPECT_NE(offloaded.result.output.find("fsdp2: CPU offload: sharded parameters, gradients and optimizer state in pinned host memory"),
            std::string::npos)
      << offloaded.result.output;
  testing::expect_same_losses(on_device, offloaded, "CPU offload", 1e-4);  // AdamW on the host rounds as it may
}

}  // namespace
}  // namespace megacpp
