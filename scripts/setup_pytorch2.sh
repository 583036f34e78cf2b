#!/usr/bin/env bash
# A Debian trixie root with PyTorch 2.x (trixie's python3-torch, 2.6) for the tests that check
# megacpp's checkpoints against torch.distributed.checkpoint itself, and for remaking
# tests/fixtures/dcp_pytorch2. bookworm's python3-torch (1.13) has no usable DCP module.
#
#   scripts/setup_pytorch2.sh [ROOT]      ROOT defaults to .cache/pytorch2
#
# Everything comes from Debian's archive (debootstrap, then apt-get inside the root; each step
# time-limited so a stalled mirror fails instead of hanging). Needs root (debootstrap, chroot). Idempotent: ROOT/.megacpp-ready marks a finished root; the tests
# run their Python there with `chroot ROOT python3 ...` and skip when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT="${1:-.cache/pytorch2}"
READY="$ROOT/.megacpp-ready"
SUITE=trixie
MIRROR=http://deb.debian.org/debian

if [ -f "$READY" ]; then
  echo "setup_pytorch2: $ROOT is ready ($(cat "$READY"))"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup_pytorch2: needs root (debootstrap and chroot)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! command -v debootstrap >/dev/null; then
  apt-get update
  apt-get install -y --no-install-recommends debootstrap
fi

rm -rf "$ROOT"
mkdir -p "$ROOT"
echo "setup_pytorch2: debootstrap $SUITE into $ROOT"
timeout 1200 debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || {
  tail -20 "$ROOT.log" >&2
  exit 1
}
timeout 600 chroot "$ROOT" apt-get update -qq
timeout 1200 chroot "$ROOT" apt-get install -y -qq --no-install-recommends python3-torch python3-safetensors >>"$ROOT.log" 2>&1 || {
  tail -20 "$ROOT.log" >&2
  exit 1
}
chroot "$ROOT" apt-get clean
version=$(chroot "$ROOT" python3 -c 'import torch, torch.distributed.checkpoint; print(torch.__version__)' 2>/dev/null | tail -1)
echo "torch $version, Debian $SUITE" >"$READY"
echo "setup_pytorch2: $ROOT is ready (torch $version)"
