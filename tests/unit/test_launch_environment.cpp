#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "parallel/launch_environment.h"

namespace megacpp::parallel {
namespace {

// Sets launcher variables for one test and clears every one afterwards.
class LaunchEnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
                             "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"}) {
      unsetenv(name);
    }
  }
  void TearDownThenSet(std::initializer_list<std::pair<const char*, const char*>> vars) {
    TearDown();
    for (auto& [name, value] : vars) setenv(name, value, 1);
  }
};

TEST_F(LaunchEnvironmentTest, ReadsEachLauncher) {
  TearDownThenSet({});
  auto single = read_launch_environment();
  EXPECT_EQ(single.world_size, 1);
  EXPECT_FALSE(single.distributed());

  TearDownThenSet({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "29400"}});
  auto torchrun = read_launch_environment();
  EXPECT_EQ(torchrun.rank, 3);
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.master_addr, "10.0.0.2");
  EXPECT_EQ(torchrun.master_port, 29400);
  EXPECT_EQ(torchrun.source, "torchrun");
  EXPECT_FALSE(torchrun.use_agent_store);

  TearDownThenSet({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "3"}});
  auto elastic = read_launch_environment();
  EXPECT_TRUE(elastic.use_agent_store);
  EXPECT_EQ(elastic.restart_count, 3);

  TearDownThenSet({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  auto slurm = read_launch_environment();
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.source, "slurm");

  TearDownThenSet({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  auto mpi = read_launch_environment();
  EXPECT_EQ(mpi.rank, 2);
  EXPECT_EQ(mpi.world_size, 3);
  EXPECT_EQ(mpi.source, "openmpi");
}

TEST_F(LaunchEnvironmentTest, MalformedValuesNameTheVariable) {
  TearDownThenSet({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  try {
    read_launch_environment();
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='4'"), std::string::npos) << e.what();
  }
  TearDownThenSet({{"RANK", "0"}});
  EXPECT_THROW(read_launch_environment(), std::invalid_argument);
  TearDownThenSet({{"MASTER_PORT", "http"}});
  EXPECT_THROW(read_launch_environment(), std::invalid_argument);
}

}  // namespace
}  // namespace megacpp::parallel
