#!/usr/bin/env bash
# On a fresh Debian machine: installs the dependencies, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
# The npm GPT-2 encoder the tokenizer tests compare against (pinned by package-lock.json).
npm ci --no-audit --no-fund --prefix tests/reference/gpt2
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 900
