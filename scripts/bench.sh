#!/usr/bin/env bash
# megacpp against PyTorch 2.6 eager on the same Llama, like for like (bench/bench.py): sets up the
# PyTorch 2.6 root, builds megacpp against its libtorch (build-pytorch2/) and against Debian's
# 1.13 (build/), runs every case several times interleaved, writes bench/results.json and
# regenerates docs/performance.md's tables from it (bench/report.py). About 25 minutes on 2
# cores; run it on an otherwise idle machine. Arguments go to bench.py (--sections abcdefg,
# --repeats N, --iters N, --warmup N, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_pytorch2.sh
bash scripts/build_pytorch2.sh
bash scripts/build.sh
python3 bench/bench.py --json bench/results.json "$@"
python3 bench/report.py bench/results.json --docs docs/performance.md
