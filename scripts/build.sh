#!/usr/bin/env bash
# Configures and builds megacpp into build/ (Release). Extra arguments go to cmake's configure
# step, e.g. -DCMAKE_PREFIX_PATH=... for a PyTorch 2.x libtorch. MEGACPP_BUILD_TARGETS (e.g.
# "all benchmarks") builds those targets instead of the default ones.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$(nproc)" ${MEGACPP_BUILD_TARGETS:+--target $MEGACPP_BUILD_TARGETS}
