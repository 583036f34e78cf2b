#!/usr/bin/env bash
# megacpp against PyTorch 2.6 eager on the same Llama, like for like (bench/bench.py): sets up the
# PyTorch 2.6 root, builds megacpp against its libtorch (build-pytorch2/) and against Debian's
# 1.13 (build/), runs every case several times interleaved, writes bench/results.json and
# regenerates docs/performance.md's tables from it (bench/report.py). About 25 minutes on 2
# cores; run it on an otherwise idle machine. Arguments go to bench.py (--sections abcdefgik,
# --repeats N, --iters N, --warmup N, --json FILE).
#
#   scripts/bench.sh --tensor-parallel [bench.py arguments]
#     section l instead (megacpp's tensor parallelism against FSDP2, on build/ alone: no root;
#     about 5 minutes): bench/tensor_parallel.json and its block in docs/performance.md.
#   scripts/bench.sh --scaling [bench.py arguments]
#     the scaling grid instead (section h: hidden sizes, sequence lengths, 1/2/4 ranks; about 20
#     minutes on 2 cores, builds aside): bench/scaling.json, its block in docs/performance.md and docs/scaling.png, drawn
#     by Debian's matplotlib (installed here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export MEGACPP_BENCH_COMMAND="bash scripts/bench.sh $*"  # what the results say made them
if [ "${1:-}" = "--tensor-parallel" ]; then
  shift
  bash scripts/build.sh  # section l runs megacpp-train alone, no benchmark program
  python3 bench/bench.py --sections l --json bench/tensor_parallel.json "$@"
  python3 bench/report.py bench/tensor_parallel.json --docs docs/performance.md
  exit 0
fi
scaling=0
if [ "${1:-}" = "--scaling" ]; then
  scaling=1
  shift
  if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    apt-get update
    apt-get install -y --no-install-recommends python3-matplotlib
  fi
fi
bash scripts/setup_pytorch2.sh
# The benchmark programs (megacpp-bench-*) are not in a plain build.
MEGACPP_BUILD_TARGETS="all benchmarks" bash scripts/build_pytorch2.sh
MEGACPP_BUILD_TARGETS="all benchmarks" bash scripts/build.sh
if [ $scaling -eq 1 ]; then
  python3 bench/bench.py --sections h --repeats 2 --json bench/scaling.json "$@"
  /usr/bin/python3 bench/report.py bench/scaling.json --docs docs/performance.md --plot docs/scaling.png
else
  python3 bench/bench.py --json bench/results.json "$@"
  python3 bench/report.py bench/results.json --docs docs/performance.md
fi
