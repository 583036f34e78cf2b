// Note [Job configuration]: the flags, the FSDP2 YAML, the launch environment's world and the
// batches resolved in one call, one name per size afterwards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "settings/arguments.h"
#include "settings/job_config.h"

namespace megacpp::settings {
namespace {

TrainingArguments parse(std::vector<std::string> flags) {
  std::vector<const char*> argv{"megacpp-train", "--mock-data"};
  for (auto& f : flags) argv.push_back(f.c_str());
  return parse_arguments(static_cast<int>(argv.size()), argv.data());
}

parallel::LaunchEnvironment world_of(int ranks) {
  parallel::LaunchEnvironment launch;
  launch.world_size = ranks;
  return launch;
}

std::string error_of(const std::vector<std::string>& flags, int ranks, const JobLayout& layout = {}) {
  try {
    resolve_job(parse(flags), world_of(ranks), layout);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string write_yaml(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("megacpp-job-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(JobConfig, SeveralRanksWithoutFsdp2TurnItOnAndSaySo) {
  const JobConfig one = resolve_job(parse({}), world_of(1));
  EXPECT_FALSE(one.args.use_torch_fsdp2);
  EXPECT_EQ(one.dims.world, 1);
  EXPECT_FALSE(one.batches.has_value()) << "only megacpp-train's layout plans batches";
  const JobConfig two = resolve_job(parse({}), world_of(2));
  EXPECT_TRUE(two.args.use_torch_fsdp2);
  ASSERT_FALSE(two.args.notes.empty());
  EXPECT_NE(two.args.notes.back().find("data parallelism on 2 ranks without --use-torch-fsdp2"), std::string::npos);
  EXPECT_EQ(two.dims.dp_shard, 2);
  EXPECT_EQ(two.launch.world_size, 2);
}

// The YAML's sizes and the flags' become one ParallelDims; the flags that set what the YAML sets
// are merged into one FSDP2 config; a flag and a key that disagree are refused naming both.
TEST(JobConfig, TheYamlAndTheFlagsAreOneConfigAndOneMesh) {
  const std::string yaml = write_yaml("hsdp.yaml", "sharding_size: 2\nulysses_size: 2\nmodel_args:\n  freeze_module_prefix: [embedding]\n");
  const JobConfig job = resolve_job(
      parse({"--use-torch-fsdp2", "--fsdp2-config-path", yaml, "--seq-length", "16", "--freeze-module-prefix", "output_layer", "--bf16"}),
      world_of(8));
  EXPECT_EQ(job.dims.cp, 2);
  EXPECT_EQ(job.dims.dp_shard, 2);
  EXPECT_EQ(job.dims.dp_replicate, 4);
  EXPECT_EQ(job.fsdp.freeze_module_prefix, (std::vector<std::string>{"embedding", "output_layer"}));
  EXPECT_EQ(job.fsdp.sharding.param_dtype, c10::kBFloat16);
  const std::string fp32 = write_yaml("fp32.yaml", "param_dtype: fp32\n");
  EXPECT_NE(error_of({"--use-torch-fsdp2", "--fsdp2-config-path", fp32, "--bf16"}, 2).find("--bf16 conflicts with param_dtype in " + fp32),
            std::string::npos);
  EXPECT_NE(error_of({"--use-torch-fsdp2", "--fsdp2-config-path", yaml, "--seq-length", "16"}, 3).find("does not divide the world size 3"),
            std::string::npos);
  std::filesystem::remove(yaml);
  std::filesystem::remove(fp32);
}

// A GRPO job: the rollout ranks are outside the mesh, and ROLL's strategy_config amends the
// config before the mesh is resolved.
TEST(JobConfig, OtherRanksAndAnAmendedConfigShapeTheMesh) {
  JobLayout layout;
  layout.other_ranks = 2;
  layout.amend = [](FSDP2Config& config) { config.sharding_size = 2; };
  const JobConfig job = resolve_job(parse({"--use-torch-fsdp2"}), world_of(6), layout);
  EXPECT_EQ(job.dims.world, 4);
  EXPECT_TRUE(job.dims.is_hsdp());
  EXPECT_EQ(job.fsdp.sharding_size, 2);
}

// megacpp-train's batches: the accumulation, the ramp and --train-samples' iterations, refused
// before any process starts when they are not whole micro-steps.
TEST(JobConfig, MegatronsBatchesAreResolvedWithTheWorld) {
  const JobConfig job =
      resolve_job(parse({"--micro-batch-size", "2", "--global-batch-size", "16", "--train-samples", "160"}), world_of(4), JobLayout::training());
  ASSERT_TRUE(job.batches.has_value());
  EXPECT_EQ(job.batches->accumulation, 2);
  EXPECT_EQ(job.batches->global_batch, 16);
  EXPECT_EQ(job.args.train_iters, 10);
  const JobConfig ramp = resolve_job(
      parse({"--micro-batch-size", "2", "--global-batch-size", "16", "--rampup-batch-size", "8", "8", "40", "--train-samples", "160"}),
      world_of(4), JobLayout::training());
  EXPECT_TRUE(ramp.batches->rampup.ramps());
  EXPECT_EQ(ramp.args.train_iters, ramp.batches->rampup.iterations_for_samples(160));
  EXPECT_GT(ramp.args.train_iters, 10) << "the ramp's smaller batches take more iterations";
  EXPECT_NE(error_of({"--micro-batch-size", "3", "--global-batch-size", "8"}, 2, JobLayout::training())
                .find("--global-batch-size (8) must be divisible by --micro-batch-size (3) x data-parallel size (2)"),
            std::string::npos);
  EXPECT_EQ(error_of({"--micro-batch-size", "3", "--global-batch-size", "8"}, 2), "") << "a program that plans no batches";
}

}  // namespace
}  // namespace megacpp::settings
