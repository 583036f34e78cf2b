// megacpp-run: a torchrun-like process spawner (POSIX + C++17 only, no libtorch).
//
//   megacpp-run [options] PROGRAM [ARGS...]
//
// Starts --nproc-per-node copies of PROGRAM with the torchrun environment
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
// MASTER_ADDR, MASTER_PORT) and compute threads per rank (OMP_NUM_THREADS,
// OMP_WAIT_POLICY; see thread_environment), prefixes their output with "[rank<R>]: " and tears
// every rank down as soon as one fails or the launcher is interrupted.
#pragma once

#include "launch_options.h"

namespace megacpp::launch {

// Spawns and supervises the ranks. Returns 0 if every rank exited 0, 1 if a
// rank failed, 128+N if the launcher received signal N (SIGINT/SIGTERM).
int run_launcher(const LaunchOptions& opts);

}  // namespace megacpp::launch
