// megacpp-run and megacpp-train together, end to end: a job split over two megacpp-run
// "nodes" on one machine, a rank killed mid-training (one node and two), Ctrl-C/SIGTERM to the
// launcher, and megacpp-train started without megacpp-run: under torchrun-, srun- and
// mpirun-style environments and under a real torchrun (Debian's python3-torch). Every launcher runs in its own process group, so "no process of
// the job is left" is checked over the whole group, orphans included.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ProcessEnvironment;
using testing::StreamingProcess;

// A tiny model: a run's time is mostly process start-up and rendezvous.
std::vector<std::string> train_command(int train_iters) {
  std::vector<std::string> args{MEGACPP_TRAIN_BINARY};
  std::istringstream flags(
      "--model-type llama --mock-data --seed 1234 --tokenizer-type NullTokenizer --vocab-size 127 --eval-iters 0 --num-layers 2 "
      "--hidden-size 32 --num-attention-heads 4 --seq-length 16 --micro-batch-size 1 --log-interval 1 "
      "--use-torch-fsdp2 --distributed-timeout-minutes 1 --train-iters " +
      std::to_string(train_iters));
  for (std::string f; flags >> f;) args.push_back(f);
  return args;
}

constexpr int kShortRun = 4;        // iterations of the runs whose losses are compared
constexpr int kLongRun = 1000000;   // runs that are killed long before they end
constexpr auto kRunTimeout = 180s;  // a hang fails the test instead of blocking ctest
// Seen in the output once rank 0 has finished a training step.
constexpr const char* kIterationLine = "| lm loss: ";

std::vector<std::string> launcher(int nproc, int nnodes, int node_rank, int port, int train_iters) {
  std::vector<std::string> args{MEGACPP_RUN_BINARY,  "--nproc-per-node", std::to_string(nproc),
                                "--nnodes",          std::to_string(nnodes),
                                "--node-rank",       std::to_string(node_rank),
                                "--master-addr",     "127.0.0.1",
                                "--master-port",     std::to_string(port),
                                "--grace-seconds",   "5"};
  for (const std::string& a : train_command(train_iters)) args.push_back(a);
  return args;
}

std::vector<double> losses_in(const std::string& output) {
  static const std::regex loss(R"(lm loss: ([0-9.]+E[-+][0-9]+))");
  std::vector<double> out;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), loss); it != std::sregex_iterator(); ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

void expect_same_losses(const std::vector<double>& reference, const std::vector<double>& losses,
                        const std::string& what, const std::string& output) {
  ASSERT_EQ(losses.size(), reference.size()) << what << "\n" << output;
  for (size_t i = 0; i < losses.size(); ++i) {
    EXPECT_LE(std::abs(losses[i] - reference[i]), 1e-6 * std::abs(reference[i]))
        << what << ": iteration " << i + 1 << " loss " << losses[i] << " vs " << reference[i];
  }
}

// Losses of a single-node megacpp-run job of `world` ranks.
std::vector<double> single_node_losses(int world) {
  StreamingProcess job(launcher(world, 1, 0, 0, kShortRun));
  EXPECT_TRUE(job.wait(kRunTimeout)) << "single-node reference run hung:\n" << job.output();
  EXPECT_EQ(job.exit_code(), 0) << job.output();
  const std::vector<double> losses = losses_in(job.output());
  EXPECT_EQ(losses.size(), static_cast<size_t>(kShortRun)) << job.output();
  return losses;
}

// The live child of `launcher_pid` started with RANK=`rank`; -1 if there is none.
pid_t rank_pid(pid_t launcher_pid, int rank) {
  for (pid_t pid : testing::child_pids(launcher_pid)) {
    if (testing::initial_environment_value(pid, "RANK") == std::to_string(rank)) return pid;
  }
  return -1;
}

void expect_whole_group_gone(const StreamingProcess& job, const std::string& what) {
  EXPECT_TRUE(testing::processes_in_group(job.pid()).empty())
      << what << ": processes of the job are still running after the launcher exited";
}

void report(const std::string& key, double seconds) {
  ::testing::Test::RecordProperty(key, std::to_string(seconds));
  std::printf("[ timing   ] %s: %.2f s\n", key.c_str(), seconds);
}

// ------------------------------------------------------------------ two nodes --

void check_two_nodes_match_one(int nproc_per_node) {
  const int world = 2 * nproc_per_node;
  const std::vector<double> reference = single_node_losses(world);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kShortRun));

  const int port = testing::free_port();
  // Node 1 first: its ranks must wait for node 0's rank 0 to host the store.
  StreamingProcess node1(launcher(nproc_per_node, 2, 1, port, kShortRun));
  StreamingProcess node0(launcher(nproc_per_node, 2, 0, port, kShortRun));
  ASSERT_TRUE(node0.wait(kRunTimeout)) << node0.output();
  ASSERT_TRUE(node1.wait(kRunTimeout)) << node1.output();
  EXPECT_EQ(node0.exit_code(), 0) << node0.output();
  EXPECT_EQ(node1.exit_code(), 0) << node1.output();
  expect_same_losses(reference, losses_in(node0.output()), "node 0 of 2", node0.output());
  // Every rank prints its own memory line: each node ran exactly its own ranks.
  for (int r = 0; r < world; ++r) {
    const StreamingProcess& home = r < nproc_per_node ? node0 : node1;
    const StreamingProcess& other = r < nproc_per_node ? node1 : node0;
    const std::string line = "[rank" + std::to_string(r) + "]: [rank " + std::to_string(r) + "] memory (MB)";
    EXPECT_NE(home.output().find(line), std::string::npos) << home.output();
    EXPECT_EQ(other.output().find("[rank" + std::to_string(r) + "]: "), std::string::npos) << other.output();
  }
}

TEST(LaunchEndToEnd, TwoNodesOfOneRankMatchOneNodeOfTwo) { check_two_nodes_match_one(1); }

TEST(LaunchEndToEnd, TwoNodesOfTwoRanksMatchOneNodeOfFour) { check_two_nodes_match_one(2); }

// ------------------------------------------------------------- a killed rank --

TEST(LaunchEndToEnd, KilledRankStopsTheWholeJob) {
  StreamingProcess job(launcher(4, 1, 0, 0, kLongRun));
  ASSERT_TRUE(job.wait_for_output(kIterationLine, kRunTimeout)) << job.output();
  const pid_t victim = rank_pid(job.pid(), 2);
  ASSERT_GT(victim, 0) << "no child of the launcher has RANK=2";
  EXPECT_EQ(testing::child_pids(job.pid()).size(), 4u);

  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_TRUE(job.wait(90s)) << "the launcher did not exit after rank 2 was killed:\n" << job.output();
  const double seconds = seconds_between(killed_at, job.exit_time());
  report("single_node_exit_after_kill_s", seconds);

  EXPECT_EQ(job.exit_code(), 1) << job.output();
  EXPECT_LT(seconds, 20.0) << "the distributed timeout is 60 s; teardown should not wait for it";
  const std::string output = job.output();
  EXPECT_NE(output.find("megacpp-run: rank 2 (pid " + std::to_string(victim) + ") was killed by signal SIGKILL (9)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("megacpp-run: stopping: rank 2 failed first"), std::string::npos) << output;
  expect_whole_group_gone(job, "single node");
}

TEST(LaunchEndToEnd, KilledRankOnOneNodeStopsBothNodes) {
  const int port = testing::free_port();
  StreamingProcess node0(launcher(2, 2, 0, port, kLongRun));
  StreamingProcess node1(launcher(2, 2, 1, port, kLongRun));
  ASSERT_TRUE(node0.wait_for_output(kIterationLine, kRunTimeout)) << node0.output() << node1.output();
  const pid_t victim = rank_pid(node1.pid(), 2);
  ASSERT_GT(victim, 0) << "no child of node 1's launcher has RANK=2";

  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const bool node1_done = node1.wait(90s);
  const bool node0_done = node0.wait(90s);
  ASSERT_TRUE(node1_done) << "node 1's launcher hung:\n" << node1.output();
  ASSERT_TRUE(node0_done) << "node 0's launcher hung:\n" << node0.output();
  const double node1_seconds = seconds_between(killed_at, node1.exit_time());
  const double node0_seconds = seconds_between(killed_at, node0.exit_time());
  report("two_node_killed_node_exit_after_kill_s", node1_seconds);
  report("two_node_surviving_node_exit_after_kill_s", node0_seconds);

  EXPECT_EQ(node1.exit_code(), 1) << node1.output();
  EXPECT_NE(node1.output().find("megacpp-run: rank 2 (pid " + std::to_string(victim) +
                                ") was killed by signal SIGKILL (9)"),
            std::string::npos)
      << node1.output();
  EXPECT_NE(node1.output().find("stopping: rank 2 failed first"), std::string::npos) << node1.output();
  EXPECT_LT(node1_seconds, 20.0);
  // Node 0 only learns of it through its ranks: they lose their peers in a collective.
  EXPECT_EQ(node0.exit_code(), 1) << node0.output();
  EXPECT_NE(node0.output().find("failed first"), std::string::npos) << node0.output();
  EXPECT_LT(node0_seconds, 60.0) << "node 0 outlived the 1-minute distributed timeout:\n" << node0.output();
  expect_whole_group_gone(node0, "node 0");
  expect_whole_group_gone(node1, "node 1");
}

// -------------------------------------------------------------------- signals --

// Starts a 2-rank job, waits for training to run, delivers `sig` with `deliver` and checks
// that the launcher exits 128+sig promptly with no rank left behind.
void check_interrupted(int sig, const std::function<void(const StreamingProcess&)>& deliver, const std::string& what) {
  StreamingProcess job(launcher(2, 1, 0, 0, kLongRun));
  ASSERT_TRUE(job.wait_for_output(kIterationLine, kRunTimeout)) << job.output();
  ASSERT_EQ(testing::child_pids(job.pid()).size(), 2u);
  const auto sent_at = Clock::now();
  deliver(job);
  ASSERT_TRUE(job.wait(60s)) << what << ": the launcher did not exit:\n" << job.output();
  const double seconds = seconds_between(sent_at, job.exit_time());
  report(what + "_exit_s", seconds);
  EXPECT_EQ(job.exit_code(), 128 + sig) << what << "\n" << job.output();
  EXPECT_LT(seconds, 5.0) << what << ": ranks should die on the forwarded signal, not the SIGKILL after the grace period";
  EXPECT_EQ(job.output().find("failed first"), std::string::npos) << what << "\n" << job.output();
  expect_whole_group_gone(job, what);
}

TEST(LaunchEndToEnd, SigintToTheLauncherStopsEveryRank) {
  check_interrupted(SIGINT, [](const StreamingProcess& job) { job.send(SIGINT); }, "sigint");
}

TEST(LaunchEndToEnd, SigtermToTheLauncherStopsEveryRank) {
  check_interrupted(SIGTERM, [](const StreamingProcess& job) { job.send(SIGTERM); }, "sigterm");
}

// A terminal's Ctrl-C reaches the launcher and every rank at once.
TEST(LaunchEndToEnd, CtrlCToTheWholeProcessGroupStopsEveryRank) {
  check_interrupted(SIGINT, [](const StreamingProcess& job) { ::killpg(job.pid(), SIGINT); }, "ctrl_c");
}

// ---------------------------------------------------------- without megacpp-run --

using EnvironmentForRank = std::function<ProcessEnvironment(int rank, int world, int port)>;

// Every launcher variable megacpp-train might read, so the test's own environment cannot leak in.
const std::vector<std::string> kLauncherVariables = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"};

std::vector<double> losses_without_launcher(int world, const EnvironmentForRank& environment, const std::string& what) {
  const int port = testing::free_port();
  std::vector<std::unique_ptr<StreamingProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    ProcessEnvironment env = environment(r, world, port);
    env.unset.insert(env.unset.end(), kLauncherVariables.begin(), kLauncherVariables.end());
    ranks.push_back(std::make_unique<StreamingProcess>(train_command(kShortRun), env));
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(ranks[r]->wait(kRunTimeout)) << what << " rank " << r << " hung:\n" << ranks[r]->output();
    EXPECT_EQ(ranks[r]->exit_code(), 0) << what << " rank " << r << ":\n" << ranks[r]->output();
    // Each process found its own rank in the environment (a world of 1 would print "[rank 0]").
    EXPECT_NE(ranks[r]->output().find("[rank " + std::to_string(r) + "] memory (MB)"), std::string::npos)
        << what << " rank " << r << ":\n" << ranks[r]->output();
  }
  return losses_in(ranks[0]->output());
}

TEST(LaunchEndToEnd, TorchrunSlurmAndOpenMpiEnvironmentsMatchMegacppRun) {
  const std::vector<double> reference = single_node_losses(2);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kShortRun));

  // What `torchrun --no-python --nproc-per-node 2 --rdzv-backend c10d` gives each worker
  // (the agent picks MASTER_PORT; the workers host their own store there).
  const EnvironmentForRank torchrun = [](int rank, int world, int port) {
    ProcessEnvironment env;
    env.set = {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world)},
               {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(world)},
               {"GROUP_RANK", "0"},                  {"GROUP_WORLD_SIZE", "1"},
               {"ROLE_RANK", std::to_string(rank)},  {"ROLE_WORLD_SIZE", std::to_string(world)},
               {"ROLE_NAME", "default"},             {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", std::to_string(port)}, {"TORCHELASTIC_RESTART_COUNT", "0"},
               {"TORCHELASTIC_MAX_RESTARTS", "0"},   {"TORCHELASTIC_RUN_ID", "megacpp-test"},
               {"TORCHELASTIC_USE_AGENT_STORE", "False"}, {"OMP_NUM_THREADS", "1"}};
    return env;
  };
  // What `srun --ntasks 2` gives each task on one node. megacpp-train does not derive the
  // rendezvous from SLURM_* (e.g. SLURM_LAUNCH_NODE_IPADDR): the batch script exports
  // MASTER_ADDR/MASTER_PORT, as for Megatron under SLURM.
  const EnvironmentForRank srun = [](int rank, int world, int port) {
    ProcessEnvironment env;
    env.set = {{"SLURM_PROCID", std::to_string(rank)},  {"SLURM_NTASKS", std::to_string(world)},
               {"SLURM_LOCALID", std::to_string(rank)}, {"SLURM_NODEID", "0"},
               {"SLURM_NNODES", "1"},                   {"SLURM_JOB_NUM_NODES", "1"},
               {"SLURM_NPROCS", std::to_string(world)}, {"SLURM_NTASKS_PER_NODE", std::to_string(world)},
               {"SLURM_TASKS_PER_NODE", std::to_string(world)}, {"SLURM_STEP_NUM_TASKS", std::to_string(world)},
               {"SLURM_JOB_ID", "4242"},                {"SLURM_STEP_ID", "0"},
               {"SLURM_JOB_NODELIST", "localhost"},     {"SLURM_STEP_NODELIST", "localhost"},
               {"SLURM_NODELIST", "localhost"},         {"SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"},
               {"SLURMD_NODENAME", "localhost"},        {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", std::to_string(port)}};
    return env;
  };
  // What `mpirun -np 2` (Open MPI) gives each process, plus the exported rendezvous.
  const EnvironmentForRank mpirun = [](int rank, int world, int port) {
    ProcessEnvironment env;
    env.set = {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},       {"OMPI_COMM_WORLD_SIZE", std::to_string(world)},
               {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(world)},
               {"OMPI_COMM_WORLD_NODE_RANK", "0"},                  {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", std::to_string(port)}};
    return env;
  };
  for (const auto& [name, environment] :
       std::vector<std::pair<std::string, EnvironmentForRank>>{{"torchrun", torchrun}, {"srun", srun}, {"mpirun", mpirun}}) {
    SCOPED_TRACE(name);
    expect_same_losses(reference, losses_without_launcher(2, environment, name), name, "");
  }
}

// ------------------------------------------------------------- a real torchrun --

// Debian's python3-torch (PyTorch 1.13) provides a real torchrun.
using testing::kDebianPython;

bool real_torchrun_available() {
  return testing::run_command(kDebianPython + " -c 'import torch.distributed.run'").status == 0;
}

// `torchrun --no-python` of a 2-rank megacpp-train job; `rendezvous` are its rendezvous flags.
std::vector<double> real_torchrun_losses(const std::vector<std::string>& rendezvous) {
  std::vector<std::string> args{kDebianPython, "-m", "torch.distributed.run", "--no_python", "--nproc_per_node", "2",
                                // The agent polls its workers this often (default 5 s, which would
                                // add seconds to every run).
                                "--monitor_interval", "0.2",
                                // PyTorch 1.13 on Python 3.11 cannot parse the default
                                // "--redirects 0" (its Std.from_str misses the zero IntFlag member):
                                // redirect stdout to --log_dir and tee it back, "[default<R>]:"-prefixed.
                                "--redirects", "1", "--tee", "1", "--log_dir", testing::scratch_dir() + "/torchrun"};
  args.insert(args.end(), rendezvous.begin(), rendezvous.end());
  for (const std::string& a : train_command(kShortRun)) args.push_back(a);
  ProcessEnvironment env;
  env.unset = kLauncherVariables;
  env.unset.insert(env.unset.end(), {"PYTHONPATH", "PYTHONHOME"});
  StreamingProcess job(args, env);
  EXPECT_TRUE(job.wait(kRunTimeout)) << "torchrun hung:\n" << job.output();
  EXPECT_EQ(job.exit_code(), 0) << job.output();
  EXPECT_NE(job.output().find("[default1]:[rank 1] memory (MB)"), std::string::npos) << job.output();
  return losses_in(job.output());
}

// The c10d rendezvous backend (also what --standalone uses) hands the workers a fresh
// MASTER_PORT with TORCHELASTIC_USE_AGENT_STORE=False: rank 0 hosts the store, as under
// megacpp-run.
TEST(LaunchEndToEnd, RealTorchrunWithC10dRendezvousMatchesMegacppRun) {
  ASSERT_TRUE(real_torchrun_available()) << kDebianPython << " cannot import torch: scripts/setup.sh installs python3-torch";
  const std::vector<double> reference = single_node_losses(2);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kShortRun));
  const std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
  const std::vector<double> losses = real_torchrun_losses({"--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint});
  expect_same_losses(reference, losses, "torchrun --rdzv_backend c10d", "");
}

// torchrun's default (static) rendezvous: its agent already listens on MASTER_PORT and sets
// TORCHELASTIC_USE_AGENT_STORE=True, so every worker, rank 0 included, must join that store
// as a client (under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>") instead of hosting one.
TEST(LaunchEndToEnd, RealTorchrunWithStaticRendezvousMatchesMegacppRun) {
  ASSERT_TRUE(real_torchrun_available()) << kDebianPython << " cannot import torch: scripts/setup.sh installs python3-torch";
  const std::vector<double> reference = single_node_losses(2);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kShortRun));
  const std::vector<double> losses = real_torchrun_losses(
      {"--nnodes", "1", "--master_addr", "127.0.0.1", "--master_port", std::to_string(testing::free_port())});
  expect_same_losses(reference, losses, "torchrun (static rendezvous)", "");
}

}  // namespace
}  // namespace megacpp
