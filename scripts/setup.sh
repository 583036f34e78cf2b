#!/usr/bin/env bash
# Installs every Debian package megacpp needs to build and test (idempotent).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  debootstrap  # the Debian trixie roots with PyTorch 2.6 (scripts/setup_pytorch2.sh)
  libtorch-dev libgloo-dev libopenblas0-pthread
  libcxxopts-dev libyaml-cpp-dev libhdf5-dev libspdlog-dev libfmt-dev
  libpcre2-dev nlohmann-json3-dev zlib1g-dev
  libutf8proc-dev  # NFC for Hugging Face tokenizers that normalize (Qwen)
  libsentencepiece-dev sentencepiece  # SentencePieceTokenizer; spm_train / spm_encode make and check its test model
  libstb-dev  # decoding and resizing the images of image-text data
  dataset-fashion-mnist  # real images for the vision-language demo (scripts/vl_demo.sh)
  libgtest-dev googletest
  python3 python3-numpy
  python3-jinja2  # jinja2 as transformers renders chat templates: the reference of tests/io/test_jinja.cpp
  python3-torch  # a real torchrun (/usr/bin/python3 -m torch.distributed.run) for the launch end-to-end tests
  fortunes  # the quickstart's English text (/usr/share/games/fortunes)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm run the reference tokenizers (tests/reference/gpt2, tests/reference/hf_tokenizers); any
# install on PATH will do.
command -v npm >/dev/null || missing+=(nodejs npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
