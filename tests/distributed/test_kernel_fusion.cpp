// Training with the fused CPU kernels (Note [Fused kernels] in models/kernels/fusion.h) gives the
// losses of libtorch's composition (--no-kernel-fusion) on one rank, FSDP on 2 ranks and with
// packed documents (per-sample rotary positions) and with every step clipped, in fp32 within
// 1e-5 and in bf16 within 2e-2;
// Megatron's --no-rope-fusion and --no-bias-swiglu-fusion and MindSpeed's --use-fused-* switches
// are taken.
#include <gtest/gtest.h>

#include "tests/support/train_run.h"

namespace megacpp {
namespace {

const std::string kFusionTrain =
    "--model-type llama --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 --ffn-hidden-size 56 "
    "--tokenizer-type NullTokenizer --vocab-size 301 --seq-length 33 --max-position-embeddings 33 --micro-batch-size 2 "
    "--global-batch-size 4 --mock-data --log-interval 1 --lr 1e-2 --eval-iters 0 --train-iters 6 --seed 3";

TEST(KernelFusion, TrainingLossesAreTheCompositionsOnEveryLayout) {
  const testing::TrainRun composed = testing::train(1, kFusionTrain + " --no-kernel-fusion");
  testing::expect_trained(composed, 6);
  testing::expect_same_losses(composed, testing::train(1, kFusionTrain), "fused kernels, 1 rank", 1e-5);
  testing::expect_same_losses(composed, testing::train(2, kFusionTrain + " --use-torch-fsdp2"), "fused kernels, FSDP on 2 ranks", 1e-5);
  testing::expect_same_losses(composed,
                              testing::train(1, kFusionTrain + " --no-rope-fusion --no-bias-swiglu-fusion --use-fused-rmsnorm "
                                                         "--use-fused-swiglu --use-fused-rotary-pos-emb --cross-entropy-loss-fusion"),
                              "Megatron's and MindSpeed's fusion switches", 1e-5);
  const std::string packed = kFusionTrain + " --reset-position-ids --reset-attention-mask --eod-mask-loss";
  testing::expect_same_losses(testing::train(1, packed + " --no-kernel-fusion"), testing::train(1, packed),
                              "fused kernels, packed documents", 1e-5);
  // Every step clipped (norms ~1): the fused AdamW's pass scales the gradients as it reads them.
  const std::string clipped = kFusionTrain + " --clip-grad 0.05";
  testing::expect_same_losses(testing::train(1, clipped + " --no-kernel-fusion"), testing::train(1, clipped),
                              "fused kernels, clipping in AdamW's pass", 1e-5);
  const std::string bf16 = kFusionTrain + " --bf16 --use-torch-fsdp2";
  testing::expect_same_losses(testing::train(1, bf16 + " --no-kernel-fusion"), testing::train(1, bf16), "fused kernels, bf16", 2e-2);
}

}  // namespace
}  // namespace megacpp
