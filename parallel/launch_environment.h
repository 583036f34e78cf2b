// Where this process sits in a job, read from the launcher's environment variables.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::parallel {

struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  std::string source = "default";  // which launcher set it: torchrun, slurm, openmpi, default
  // torchrun's elastic agent already serves a TCPStore on MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client, under the prefix
  // "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as PyTorch's own workers do.
  bool use_agent_store = false;
  int restart_count = 0;

  bool distributed() const { return world_size > 1; }
};

// Reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (torchrun, megacpp-run), else
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, else OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK};
// without any of them a single process. Malformed values throw naming the variable.
LaunchEnvironment read_launch_environment();

}  // namespace megacpp::parallel
