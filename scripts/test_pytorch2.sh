#!/usr/bin/env bash
# Builds megacpp against PyTorch 2.6's libtorch (the root of scripts/setup_pytorch2.sh) and runs
# the test suite there, but for tests that do not depend on the libtorch and cannot or need not
# run twice:
#  - LaunchEndToEnd.RealTorchrun*: Debian trixie's torchrun cannot start (its rendezvous
#    TCPStores ask for libuv, which Debian's PyTorch is built without); they run against
#    bookworm's torchrun in the main suite.
#  - Quickstart.*, LaunchScripts.*, FineTuningScripts.*, LlavaTraining.VlDemo* and
#    Answering.SftDemo*: the demos and the published launch scripts, end to end: 27 minutes of
#    test time here against 10 in the main suite (the bf16 scripts' matrix products are ten times slower in PyTorch 2.6 on a CPU without
#    bf16 instructions). They test megacpp's own flags, scripts and training quality, not the
#    libtorch, and run in the main suite; each libtorch-dependent path they take (bf16, FSDP2 and
#    HSDP layouts, recompute, checkpoints, LLaVA) has its parity test here.
#  - Layers.* and Docs.*: they read the sources and the docs, the same whatever the libtorch.
#  - megacpp-io-tests and megacpp-launcher-tests: they do not link libtorch, so they test the
#    same code as in the main suite; they are not even built here (their ctest placeholders,
#    *_NOT_BUILT, are left out).
# Arguments go to ctest (e.g. -R 'FSDP|Checkpoint').
set -euo pipefail
cd "$(dirname "$0")/.."
MEGACPP_BUILD_TARGETS=megacpp-tests bash scripts/build_pytorch2.sh
bash scripts/in_pytorch2_root.sh ctest --test-dir build-pytorch2 -j"$(nproc)" --output-on-failure --timeout 900 \
  -E '^(LaunchEndToEnd\.RealTorchrun|Quickstart\.|LaunchScripts\.|FineTuningScripts\.|LlavaTraining\.VlDemo|Answering\.SftDemo|Layers\.|Docs\.)|_NOT_BUILT$' "$@"
