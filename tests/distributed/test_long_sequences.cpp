// Long sequences. Ulysses sequence parallelism (Note [Ulysses] in parallel/ulysses.h): the
// all-to-alls are exact and each the other's adjoint; the mesh groups consecutive ranks; training
// with each sequence split over 2 ranks gives the losses of one rank without FSDP, with FSDP,
// HSDP, recompute and TiledMLP; what cannot be split is refused by name; a sequence too long for
// a memory limit trains split. TiledMLP in a mixture-of-experts model tiles its dense MLPs only.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/ulysses.h"
#include "tests/support/distributed_test.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::expect_same_losses;
using testing::fsdp_flags;
using testing::train;
using testing::TrainRun;

TEST(Ulysses, MeshGroupsConsecutiveRanksBesideFsdpAndHsdp) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    auto mesh = parallel::DeviceMesh::build(rt, 2, 2);  // HSDP ddp 2 x fsdp 2, Ulysses pairs {0,1} {2,3}
    EXPECT_EQ(mesh.cp().global_ranks, (std::vector<int>{rt.rank() / 2 * 2, rt.rank() / 2 * 2 + 1}));
    EXPECT_EQ(mesh.fsdp().global_ranks, (std::vector<int>{rt.rank() / 2 * 2, rt.rank() / 2 * 2 + 1}));
    EXPECT_EQ(mesh.ddp().global_ranks, (std::vector<int>{rt.rank() % 2, rt.rank() % 2 + 2}));
    EXPECT_EQ(mesh.data_parallel_size(), 2);
    EXPECT_EQ(mesh.data_parallel_rank(), rt.rank() / 2);
    EXPECT_EQ(mesh.describe(), "HSDP (ddp=2, fsdp=2), Ulysses 2 (data-parallel 2)");
    auto whole = parallel::DeviceMesh::build(rt, -1, 4);
    EXPECT_EQ(whole.cp().size(), 4);
    EXPECT_EQ(whole.data_parallel_size(), 1);
    try {
      parallel::DeviceMesh::build(rt, -1, 3);
      ADD_FAILURE() << "ulysses_size 3 on 4 ranks must be refused";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("ulysses_size=3 does not divide the world size 4"), std::string::npos);
    }
  });
}

// The whole [batch, seq, heads * d] tensor every rank can build; rank r holds rows
// [r * seq / p, (r + 1) * seq / p) before the exchange and columns of heads [r * h / p, ...) after.
TEST(Ulysses, ExchangeIsExactAndItsOwnAdjoint) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const parallel::Group& group = rt.world();
    const int64_t batch = 2, seq = 6, heads = 4, d = 3, p = 2;
    torch::manual_seed(11);
    const at::Tensor whole = torch::randn({batch, seq, heads * d});
    const at::Tensor weight = torch::randn({batch, seq, heads * d});
    at::Tensor mine = parallel::sequence_slice(whole, 1, group).clone().requires_grad_(true);
    at::Tensor by_heads = parallel::sequence_to_heads(mine, group);
    const at::Tensor expected = whole.narrow(2, rt.rank() * heads * d / p, heads * d / p);
    EXPECT_TRUE(by_heads.equal(expected)) << "rank " << rt.rank() << " gets the whole sequence of its heads";
    EXPECT_TRUE(parallel::heads_to_sequence(by_heads, group).equal(mine)) << "the inverse restores the slice";
    // d/dx sum(w * to_heads(x)) is to_sequence(w): each rank's gradient is its slice of the whole w
    // put where its values went.
    const at::Tensor w = weight.narrow(2, rt.rank() * heads * d / p, heads * d / p);
    (by_heads * w).sum().backward();
    at::Tensor whole_grad = torch::zeros_like(whole);
    for (int r = 0; r < p; ++r) {
      whole_grad.narrow(2, r * heads * d / p, heads * d / p).copy_(weight.narrow(2, r * heads * d / p, heads * d / p));
    }
    EXPECT_TRUE(mine.grad().equal(parallel::sequence_slice(whole_grad, 1, group)));
  });
}

// Qwen3-style: QK norm and 4 query heads over 2 key/value groups, sequences of 128 tokens.
const std::string kLongSequenceModel =
    "--model-type llama --qk-layernorm --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 "
    "--ffn-hidden-size 48 --mock-data --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 4 "
    "--seed 7 --seq-length 128 --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --train-iters 8 "
    "--eval-interval 4 --eval-iters 2 --init-method-std 0.2 --lr 1e-2 ";

TEST(Ulysses, SameLossesAsOneRankOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const TrainRun one = train(1, kLongSequenceModel);
  testing::expect_trained(one, 8);
  ASSERT_EQ(one.validation.size(), 4u) << one.result.output;  // iterations 4 and 8, the end: val and test
  const TrainRun pair = train(2, kLongSequenceModel + "--use-torch-fsdp2 --context-parallel-size 2");
  EXPECT_NE(pair.result.output.find("FSDP (fsdp=2), Ulysses 2 (data-parallel 1)"), std::string::npos) << pair.result.output;
  EXPECT_NE(pair.result.output.find("batch: micro 2 x data-parallel 1 x accumulation 4"), std::string::npos) << pair.result.output;
  EXPECT_NE(pair.result.output.find("ulysses: each sequence split over 2 ranks [0, 1]; 2 attention layer(s)"), std::string::npos)
      << pair.result.output;
  expect_same_losses(one, pair, "Ulysses 2 on 2 ranks (--context-parallel-size)", 1e-5);
  expect_same_losses(one, train(4, kLongSequenceModel + fsdp_flags(dir, "roll.yaml", "strategy_config:\n  ulysses_size: 2\n")),
                     "Ulysses 2 with FSDP on 4 ranks (ROLL's strategy_config)", 1e-5);
  const std::string hsdp = "model_args:\n  ulysses_size: 2\nsharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n";
  expect_same_losses(one, train(4, kLongSequenceModel + fsdp_flags(dir, "hsdp.yaml", hsdp)), "Ulysses 2 with HSDP 2x2", 1e-5);
  const std::string tiled = "ulysses_size: 2\napply_tiled_mlp: true\ntiled_num_shards: 4\nsub_modules_to_wrap: ['layers.{*}']\n";
  expect_same_losses(one, train(2, kLongSequenceModel + fsdp_flags(dir, "tiled.yaml", tiled) + testing::kRecomputeOnMetaDevice),
                     "Ulysses 2, TiledMLP, recompute, meta-device init", 1e-5);
}

TEST(Ulysses, RefusesWhatCannotBeSplitByName) {
  const std::string one_group = "--model-type llama --num-layers 1 --hidden-size 32 --num-attention-heads 4 --num-query-groups 1 "
                                "--ffn-hidden-size 48 --mock-data --tokenizer-type NullTokenizer --vocab-size 99 "
                                "--seq-length 16 --micro-batch-size 1 --train-iters 1 --eval-iters 0 --use-torch-fsdp2 ";
  const TrainRun groups = train(2, one_group + "--context-parallel-size 2");
  EXPECT_NE(groups.result.status, 0);
  EXPECT_NE(groups.result.output.find("--context-parallel-size 2: the 4 attention heads (--num-attention-heads) and 1 query "
                                      "groups (--num-query-groups) of layers.0.self_attn must both divide by it"),
            std::string::npos)
      << groups.result.output;
  const TrainRun gpt = train(2, "--model-type gpt --num-layers 1 --hidden-size 32 --num-attention-heads 4 --mock-data "
                                "--tokenizer-type NullTokenizer --vocab-size 99 --seq-length 16 --micro-batch-size 1 "
                                "--train-iters 1 --eval-iters 0 --use-torch-fsdp2 --context-parallel-size 2");
  EXPECT_NE(gpt.result.output.find("--context-parallel-size 2: this model cannot split its sequences: gpt's learned position "
                                   "embeddings (wpe)"),
            std::string::npos)
      << gpt.result.output;
  const std::string dir = testing::scratch_dir();
  const TrainRun odd = train(2, one_group + "--num-query-groups 2 --seq-length 18" + fsdp_flags(dir, "u.yaml", "ulysses_size: 4\n"));
  EXPECT_NE(odd.result.output.find("--seq-length 18 does not divide by ulysses_size 4 in " + dir + "/u.yaml: each rank takes an equal slice"), std::string::npos)
      << odd.result.output;
  const TrainRun both = train(2, one_group + "--num-query-groups 2 --context-parallel-size 2" + fsdp_flags(dir, "u.yaml", "ulysses_size: 4\n"));
  EXPECT_NE(both.result.output.find("--context-parallel-size 2 conflicts with ulysses_size 4 in " + dir + "/u.yaml"), std::string::npos)
      << both.result.output;
}

TEST(TiledMlp, MixtureOfExpertsModelTilesItsDenseMlpsOnly) {
  const std::string moe = kLongSequenceModel + "--num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 24 --moe-aux-loss-coeff 0.01 "
                                   "--moe-layer-freq [0,1] ";
  const TrainRun one = train(1, moe);
  testing::expect_trained(one, 8);
  const std::string dir = testing::scratch_dir();
  const TrainRun tiled = train(2, moe + fsdp_flags(dir, "tiled.yaml", "apply_tiled_mlp: true\nsub_modules_to_wrap: ['layers.{*}']\n"));
  EXPECT_NE(tiled.result.output.find("tiled mlp: 1 MLP(s) run over 4 tiles"), std::string::npos) << tiled.result.output;
  expect_same_losses(one, tiled, "TiledMLP beside experts, FSDP on 2 ranks", 1e-5);
}

// Each rank runs under `ulimit -v` (LIMIT_KB, none when empty) through this wrapper, which keeps
// the rank's VmPeak (the kernel's high-water mark of its address space) in OUT/peak.RANK.
const char* const kLimitedRank = R"(#!/bin/sh
[ -n "$LIMIT_KB" ] && ulimit -v "$LIMIT_KB"
"$TRAIN" "$@" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  peak=$(grep VmPeak "/proc/$pid/status" 2>/dev/null) && echo "$peak" > "$OUT/peak.$RANK"
  sleep 0.05
done
wait "$pid"
)";

struct LimitedRun {
  TrainRun run;
  double peak_kb = 0;  // the largest VmPeak of the ranks
};

LimitedRun run_limited(const std::string& dir, const std::string& flags, double limit_kb) {
  const std::string wrapper = testing::write_file(dir, "limited_rank.sh", kLimitedRank);
  chmod(wrapper.c_str(), 0755);
  for (int r = 0; r < 2; ++r) std::remove((dir + "/peak." + std::to_string(r)).c_str());
  const std::string env = "MALLOC_ARENA_MAX=2 TRAIN=" + std::string(MEGACPP_TRAIN_BINARY) + " OUT=" + dir +
                          " LIMIT_KB=" + (limit_kb > 0 ? std::to_string(static_cast<long>(limit_kb)) : std::string());
  LimitedRun limited;
  limited.run = testing::parse_training_output(testing::run_command(env + " " + MEGACPP_RUN_BINARY +
                                                                    " --nproc-per-node 2 --master-port 0 " + wrapper + " " + flags));
  for (int r = 0; r < 2; ++r) {
    const std::string line = testing::read_file(dir + "/peak." + std::to_string(r));  // "VmPeak:  123456 kB"
    if (line.find("VmPeak:") == 0) limited.peak_kb = std::max(limited.peak_kb, std::stod(line.substr(7)));
  }
  return limited;
}

// 4,096 tokens: the logits and their gradient ([tokens, 8192] floats each, 128 MB) and the
// attention activations are most of a rank's memory. Split over 2 ranks, each holds half.
TEST(Ulysses, LongSequenceTrainsUnderAMemoryLimitOnlySplit) {
  const std::string dir = testing::scratch_dir();
  const std::string flags =
      "--model-type llama --num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 256 --mock-data "
      "--tokenizer-type NullTokenizer --vocab-size 8192 --seq-length 4096 --micro-batch-size 1 --train-iters 2 "
      "--eval-iters 0 --log-interval 1 --lr 1e-3 --use-torch-fsdp2";
  const LimitedRun whole = run_limited(dir, flags, 0), split = run_limited(dir, flags + " --context-parallel-size 2", 0);
  testing::expect_trained(whole.run, 2);
  testing::expect_trained(split.run, 2);
  ASSERT_GT(whole.peak_kb, 0) << "no VmPeak read";
  ASSERT_GT(split.peak_kb, 0) << "no VmPeak read";
  ASSERT_GT(whole.peak_kb - split.peak_kb, 100 * 1024) << "Ulysses 2 saves less than 100 MB of " << whole.peak_kb / 1024 << " MB";
  const double limit_kb = (whole.peak_kb + split.peak_kb) / 2;
  const LimitedRun refused = run_limited(dir, flags, limit_kb);
  EXPECT_NE(refused.run.result.status, 0) << "the whole sequence fits " << limit_kb / 1024 << " MB:\n" << refused.run.result.output;
  EXPECT_LT(refused.run.losses.size(), 2u);
  EXPECT_NE(refused.run.result.output.find("can't allocate memory"), std::string::npos) << refused.run.result.output;
  const LimitedRun fits = run_limited(dir, flags + " --context-parallel-size 2", limit_kb);
  testing::expect_trained(fits.run, 2);
  expect_same_losses(split.run, fits.run, "Ulysses 2 under the limit", 0);
  std::printf("VmPeak per rank: whole sequence %.0f MB, Ulysses 2 %.0f MB; limit %.0f MB\n", whole.peak_kb / 1024,
              split.peak_kb / 1024, limit_kb / 1024);
}

}  // namespace
}  // namespace megacpp
