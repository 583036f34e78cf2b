#!/usr/bin/env bash
# Builds megacpp against Debian trixie's PyTorch 2.6 inside the roots of
# scripts/setup_pytorch2.sh (this checkout mounted at its own path; see in_pytorch2_root.sh):
#
#   scripts/build_pytorch2.sh           CPU: libtorch-dev 2.6, everything including the tests,
#                                       into build-pytorch2/
#   scripts/build_pytorch2.sh --cuda    CUDA: libtorch-cuda-dev 2.6 with NCCL, the library and
#                                       the programs that use libtorch, unoptimized (compile
#                                       and link only; no GPU here), into build-cuda/
#
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--cuda" ]; then
  shift
  # The CUDA root has no cuDNN (see setup_pytorch2.sh): link without the libraries
  # libtorch_cuda loads at run time. Nothing built here runs, so it is built without
  # optimization (-O0, no debug info), which compiles in about half the time.
  bash scripts/in_pytorch2_root.sh --cuda bash -c \
    'cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=LinkCheck -DCMAKE_CXX_FLAGS_LINKCHECK=-O0 -DMEGACPP_BUILD_TESTS=OFF \
       -DMEGACPP_LINK_CHECK_ONLY=ON "$@" &&
     cmake --build build-cuda -j"$(nproc)" --target megacpp-train megacpp-convert' bash "$@"
else
  # MEGACPP_BUILD_TARGETS (e.g. megacpp-tests) builds only those targets and what they need.
  bash scripts/in_pytorch2_root.sh bash -c \
    'cmake -S . -B build-pytorch2 -DCMAKE_BUILD_TYPE=Release "$@" &&
     cmake --build build-pytorch2 -j"$(nproc)" ${MEGACPP_BUILD_TARGETS:+--target $MEGACPP_BUILD_TARGETS}' bash "$@"
fi
