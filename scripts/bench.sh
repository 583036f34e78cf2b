#!/usr/bin/env bash
# megacpp against PyTorch 2.6 eager on the same Llama, side by side (bench/bench.py): sets up the
# PyTorch 2.6 root, builds megacpp against its libtorch (build-pytorch2/) and runs both there, on
# the same libtorch and OpenBLAS. Takes about 10 minutes on 2 cores. Arguments go to bench.py
# (--sections abcde, --iters N, --warmup N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_pytorch2.sh
bash scripts/build_pytorch2.sh
exec bash scripts/in_pytorch2_root.sh python3 bench/bench.py "$@"
