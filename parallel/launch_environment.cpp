#include "parallel/launch_environment.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace megacpp::parallel {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

long parse_int_env(const char* name, long min_value, long max_value) {
  const char* text = env(name);
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min_value || value > max_value) {
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + text +
                                "' is not an integer in [" + std::to_string(min_value) + ", " +
                                std::to_string(max_value) + "]");
  }
  return value;
}

// Reads one launcher's (rank, world, local rank) triple if its rank variable is set.
bool read_triple(LaunchEnvironment& out, const char* rank, const char* world, const char* local,
                 const char* source) {
  if (!env(rank)) return false;
  if (!env(world)) {
    throw std::invalid_argument(std::string(rank) + " is set but " + world + " is not");
  }
  out.world_size = static_cast<int>(parse_int_env(world, 1, 1 << 20));
  out.rank = static_cast<int>(parse_int_env(rank, 0, out.world_size - 1));
  out.local_rank = env(local) ? static_cast<int>(parse_int_env(local, 0, 1 << 20)) : 0;
  out.source = source;
  return true;
}

}  // namespace

LaunchEnvironment read_launch_environment() {
  LaunchEnvironment out;
  read_triple(out, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun") ||
      read_triple(out, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm") ||
      read_triple(out, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi");
  if (env("MASTER_ADDR")) out.master_addr = env("MASTER_ADDR");
  if (env("MASTER_PORT")) {
    out.master_port = static_cast<std::uint16_t>(parse_int_env("MASTER_PORT", 1, 65535));
  }
  if (const char* agent = env("TORCHELASTIC_USE_AGENT_STORE")) {
    const std::string value = agent;
    out.use_agent_store = value == "True" || value == "true" || value == "1";
  }
  if (env("TORCHELASTIC_RESTART_COUNT")) {
    out.restart_count = static_cast<int>(parse_int_env("TORCHELASTIC_RESTART_COUNT", 0, 1 << 20));
  }
  return out;
}

}  // namespace megacpp::parallel
