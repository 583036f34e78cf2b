#!/usr/bin/env bash
# Builds megacpp against Debian trixie's PyTorch 2.6 inside the roots of
# scripts/setup_pytorch2.sh (this checkout mounted at its own path; see in_pytorch2_root.sh):
#
#   scripts/build_pytorch2.sh           CPU: libtorch-dev 2.6, everything including the tests,
#                                       into build-pytorch2/
#   scripts/build_pytorch2.sh --cuda    CUDA: libtorch-cuda-dev 2.6 with NCCL, the library and
#                                       programs only (compile and link; no GPU here), into
#                                       build-cuda/
#
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--cuda" ]; then
  shift
  # The CUDA root has no cuDNN (see setup_pytorch2.sh): link without the libraries
  # libtorch_cuda loads at run time.
  bash scripts/in_pytorch2_root.sh --cuda bash -c \
    'cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DMEGACPP_BUILD_TESTS=OFF -DMEGACPP_LINK_CHECK_ONLY=ON "$@" &&
     cmake --build build-cuda -j"$(nproc)"' bash "$@"
else
  bash scripts/in_pytorch2_root.sh bash -c \
    'cmake -S . -B build-pytorch2 -DCMAKE_BUILD_TYPE=Release "$@" && cmake --build build-pytorch2 -j"$(nproc)"' bash "$@"
fi
