#!/usr/bin/env bash
# On a fresh Debian machine: installs the dependencies, builds, and runs the quickstart job:
# a small Llama-style model trained with FSDP2 on 2 ranks on the English text of Debian's
# `fortunes`, with a falling validation loss (scripts/quickstart.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/quickstart.sh build data/quickstart "$@"
