// Note [Memory estimate]: a model that cannot fit is refused before it is allocated, naming the
// figure and the flags that make it; an allocation that still fails names the phase it failed in.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/support/command.h"

namespace megacpp {
namespace {

// 8 GiB of address space: room for libtorch and a small model, on any host.
std::string limited(const std::string& command) { return "ulimit -v 8388608 && " + command; }

TEST(MemoryFaults, AModelThatCannotFitIsRefusedBeforeItIsAllocatedWithItsFigure) {
  // 64 layers of hidden 8192 and FFN 22016: about 5e10 parameters, 190+ GiB in fp32.
  const std::string huge = "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 127 --num-layers 64 "
                           "--hidden-size 8192 --num-attention-heads 64 --ffn-hidden-size 22016 --seq-length 16 "
                           "--micro-batch-size 1 --train-iters 1 --eval-iters 0";
  struct Case {
    int ranks;
    std::string flags, figure;  // the flags of the run, the figure's words
    double bytes_per_parameter;
  };
  const std::string sharded = "fp32 weights, gradients and AdamW's two moments, 16 B each, divided among the 2 ranks that shard them";
  const std::string lora = " --lora-rank 8 --lora-target-modules q_proj";
  const Case cases[] = {
      // 16 B a parameter over 2 ranks: more than the 4 B of the whole model while it is built.
      {2, " --use-torch-fsdp2", sharded, 8.0},
      {2, " --use-torch-fsdp2 --init-model-with-meta-device", sharded, 8.0},
      // LoRA freezes the rest: 4 B a parameter, built whole or, from the meta device, as shards.
      {1, lora, "the whole model in fp32 while it is built", 4.0},
      {1, lora + " --use-torch-fsdp2 --init-model-with-meta-device", "fp32 weights, 4 B each, at the least (some may be frozen)", 4.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.ranks) + " rank(s):" + c.flags);
    const testing::CommandResult run = testing::run_command(limited(std::string(MEGACPP_RUN_BINARY) + " --nproc-per-node " +
                                                                    std::to_string(c.ranks) + " --master-port 0 " + MEGACPP_TRAIN_BINARY +
                                                                    " " + huge + c.flags));
    EXPECT_NE(run.status, 0);
    const std::string& out = run.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(the model cannot fit in this rank's memory: it needs at least ([0-9.]+) GiB \((\d+) parameters: )")))
        << out;
    const double parameters = std::stod(m[2]), gib = std::stod(m[1]);
    EXPECT_GT(parameters, 5e10);
    EXPECT_NEAR(gib, parameters * c.bytes_per_parameter / (1024.0 * 1024.0 * 1024.0), 0.06) << out;
    EXPECT_NE(out.find(std::string(m[2]) + " parameters: " + c.figure), std::string::npos) << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(R"(this rank has [0-9.]+ GiB \((ulimit -v|MemAvailable|the cgroup))"))) << out;
    EXPECT_NE(out.find("comes from --num-layers 64, --hidden-size 8192, --ffn-hidden-size 22016"), std::string::npos) << out;
    EXPECT_EQ(out.find("can't allocate memory"), std::string::npos) << out;
  }
}

TEST(MemoryFaults, AnAllocationThatStillFailsNamesThePhase) {
  // The model (18M parameters, 0.3 GiB) fits; a micro-batch's activations (64 x 16384 x 1024
  // floats, 4 GiB each) do not.
  const std::string fits = "--model-type llama --mock-data --tokenizer-type NullTokenizer --vocab-size 127 --num-layers 2 "
                           "--hidden-size 1024 --num-attention-heads 8 --num-query-groups 2 --ffn-hidden-size 2048 --seq-length 16384 "
                           "--micro-batch-size 64 --train-iters 1 --eval-iters 0";
  const testing::CommandResult run = testing::run_command(limited(std::string(MEGACPP_TRAIN_BINARY) + " " + fits));
  EXPECT_NE(run.status, 0);
  // The phase, then the innermost module whose forward it was (Note [Out of memory in a forward]).
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(error: out of memory in 'iteration 1: micro-batch 1 of 1': the forward of )"
                                                       R"([a-z_]+(\.[a-z_0-9]+)* \(\w+\): .*can't allocate memory)")))
      << run.output;
  EXPECT_NE(run.output.find("of this rank alone take at least "), std::string::npos) << run.output;
}

}  // namespace
}  // namespace megacpp
