#!/usr/bin/env bash
# Debian trixie roots with PyTorch 2.6, made from Debian's archive only:
#
#   scripts/setup_pytorch2.sh [ROOT]          CPU: python3-torch and libtorch-dev 2.6 on OpenBLAS,
#                                             the build toolchain and megacpp's dependencies.
#                                             ROOT defaults to .cache/pytorch2. Used by the tests
#                                             that check checkpoints against
#                                             torch.distributed.checkpoint, by the build and test
#                                             run against libtorch 2.6 (scripts/test_pytorch2.sh)
#                                             and by the benchmark's PyTorch side.
#   scripts/setup_pytorch2.sh --cuda [ROOT]   CUDA: contrib's libtorch-cuda-dev 2.6 (CUDA 12.4,
#                                             NCCL 2.22) with nvcc, for compiling and linking
#                                             megacpp's CUDA/NCCL path (no GPU needed).
#                                             ROOT defaults to .cache/pytorch2-cuda.
#
# The mirror is the one this machine's apt uses (scripts/debian_mirror.sh). Each network step is
# time-limited so a stalled mirror fails instead of hanging. Needs root (debootstrap, chroot).
# Idempotent: ROOT/.megacpp-ready records the recipe a root was made with; a root made by an
# older recipe gets what it lacks.
#
# cuDNN: Debian's nvidia-cudnn is a downloader (its install script fetches cuDNN from NVIDIA),
# which no machine here may run. megacpp never calls cuDNN and the CUDA root only compiles and
# links, so a local placeholder package stands in for it (nothing is downloaded) and the link
# allows the libraries libtorch_cuda needs at run time to be absent (MEGACPP_LINK_CHECK_ONLY).
set -euo pipefail
cd "$(dirname "$0")/.."

FLAVOR=cpu
if [ "${1:-}" = "--cuda" ]; then
  FLAVOR=cuda
  shift
fi
if [ "$FLAVOR" = cpu ]; then ROOT="${1:-.cache/pytorch2}"; else ROOT="${1:-.cache/pytorch2-cuda}"; fi
READY="$ROOT/.megacpp-ready"
SUITE=trixie
RECIPE=7  # bump when the package lists below change

BUILD_PACKAGES=(build-essential cmake ccache pkg-config libcxxopts-dev libyaml-cpp-dev libhdf5-dev
  libspdlog-dev libfmt-dev libpcre2-dev libutf8proc-dev libsentencepiece-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev googletest libstb-dev)
if [ "$FLAVOR" = cpu ]; then
  # OpenBLAS as a user's PyTorch has it: with --no-install-recommends Debian's torch would run
  # on the reference BLAS, several times slower. nodejs runs the GPT-2 reference encoder; the
  # real-data tests read the fortunes; spm_train makes the SentencePiece models tests read;
  # the vision-language tests train on Fashion-MNIST's photographs.
  PACKAGES=(python3-torch python3-safetensors python3-numpy libtorch-dev libgloo-dev
    libopenblas0-pthread nodejs fortunes sentencepiece dataset-fashion-mnist "${BUILD_PACKAGES[@]}")
else
  PACKAGES=(libtorch-cuda-dev libgloo-cuda-dev libnccl-dev nvidia-cuda-toolkit "${BUILD_PACKAGES[@]}")
fi

if [ -f "$READY" ] && grep -q "recipe $RECIPE\$" "$READY"; then
  echo "setup_pytorch2: $ROOT is ready ($(cat "$READY"))"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup_pytorch2: needs root (debootstrap and chroot)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
MIRROR=$(bash scripts/debian_mirror.sh)
LOG="$ROOT.log"

fail() {
  echo "setup_pytorch2: $1 failed; the end of $LOG:" >&2
  tail -20 "$LOG" >&2
  exit 1
}

if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
  if ! command -v debootstrap >/dev/null; then
    apt-get update
    apt-get install -y --no-install-recommends debootstrap
  fi
  rm -rf "$ROOT"
  mkdir -p "$ROOT"
  echo "setup_pytorch2: debootstrap $SUITE into $ROOT from $MIRROR"
  timeout 1200 debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$LOG" 2>&1 || fail debootstrap
fi
# contrib holds libtorch-cuda-dev, non-free the CUDA toolkit and NCCL.
echo "deb $MIRROR $SUITE main contrib non-free non-free-firmware" >"$ROOT/etc/apt/sources.list"
timeout 600 chroot "$ROOT" apt-get update -qq >>"$LOG" 2>&1 || fail "apt-get update"

if [ "$FLAVOR" = cuda ] && ! chroot "$ROOT" dpkg-query -W nvidia-cudnn >/dev/null 2>&1; then
  version=$(chroot "$ROOT" apt-cache show --no-all-versions nvidia-cudnn | sed -n 's/^Version: //p')
  mkdir -p "$ROOT/tmp/nvidia-cudnn/DEBIAN"
  cat >"$ROOT/tmp/nvidia-cudnn/DEBIAN/control" <<EOF
Package: nvidia-cudnn
Version: ${version}+megacpp.placeholder
Architecture: amd64
Maintainer: megacpp <megacpp@localhost>
Description: placeholder for the cuDNN downloader
 Stands in for Debian's nvidia-cudnn, whose install script downloads cuDNN. megacpp's CUDA root
 only compiles and links against libtorch-cuda; it never runs cuDNN.
EOF
  chroot "$ROOT" dpkg-deb --build /tmp/nvidia-cudnn /tmp/nvidia-cudnn.deb >>"$LOG" 2>&1
  chroot "$ROOT" dpkg -i /tmp/nvidia-cudnn.deb >>"$LOG" 2>&1 || fail "placeholder nvidia-cudnn"
  chroot "$ROOT" apt-mark hold nvidia-cudnn >>"$LOG" 2>&1
  rm -rf "$ROOT/tmp/nvidia-cudnn" "$ROOT/tmp/nvidia-cudnn.deb"
fi

# Disk: CI machines differ in free space. Nothing here reads the packages' manuals, and the CUDA
# root links dynamically, so dpkg leaves out the docs and CUDA's static archives (2.6 GB of its
# 7.8), keeping the cudart and culibos ones nvcc links by default.
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/megacpp-excludes" <<'EOF'
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/lib/x86_64-linux-gnu/lib*_static.a
path-exclude=/usr/lib/x86_64-linux-gnu/lib*_static_nocallback.a
path-include=/usr/lib/x86_64-linux-gnu/libcudart_static.a
path-include=/usr/lib/x86_64-linux-gnu/libculibos.a
EOF
echo "setup_pytorch2: installing ${#PACKAGES[@]} packages into $ROOT ($FLAVOR)"
timeout 2400 chroot "$ROOT" apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >>"$LOG" 2>&1 ||
  fail "apt-get install"
chroot "$ROOT" apt-get clean

if [ "$FLAVOR" = cpu ]; then
  version=$(chroot "$ROOT" python3 -c 'import torch, torch.distributed.checkpoint; print(torch.__version__)' 2>/dev/null | tail -1)
  blas=$(chroot "$ROOT" readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
  echo "torch $version, $blas, Debian $SUITE, recipe $RECIPE" >"$READY"
else
  version=$(chroot "$ROOT" dpkg-query -W -f '${Version}' libtorch-cuda-dev)
  cuda=$(chroot "$ROOT" dpkg-query -W -f '${Version}' nvidia-cuda-dev)
  echo "libtorch-cuda $version, CUDA $cuda, Debian $SUITE, recipe $RECIPE" >"$READY"
fi
echo "setup_pytorch2: $ROOT is ready ($(cat "$READY"))"
