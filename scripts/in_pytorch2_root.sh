#!/usr/bin/env bash
# Runs a command inside the PyTorch 2.x root (scripts/setup_pytorch2.sh) with this checkout
# mounted at the same path, in a private mount namespace (the mounts vanish with the command).
# The build against PyTorch 2.6's libtorch, its tests and the benchmark's PyTorch side run here.
#
#   scripts/in_pytorch2_root.sh [--cuda] COMMAND [ARGS...]   (runs in the checkout)
#   MEGACPP_PYTORCH2_ROOT=DIR scripts/in_pytorch2_root.sh ...  (another CPU root)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
if [ "${1:-}" = "--cuda" ]; then
  shift
  ROOT=$(realpath -m "$REPO/.cache/pytorch2-cuda")
else
  ROOT=$(realpath -m "${MEGACPP_PYTORCH2_ROOT:-$REPO/.cache/pytorch2}")
fi

if [ ! -f "$ROOT/.megacpp-ready" ]; then
  echo "in_pytorch2_root: $ROOT is not set up (run scripts/setup_pytorch2.sh)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "in_pytorch2_root: needs root (mount namespace and chroot)" >&2
  exit 1
fi
mkdir -p "$ROOT$REPO"
# Inside, $REPO/.cache/pytorch2 is the root itself, so the tests that chroot into it still can.
exec unshare --mount --propagation private bash -c '
  set -e
  root=$1 repo=$2; shift 2
  mount --bind "$repo" "$root$repo"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/dev/shm"
  cd "$root$repo"
  exec chroot "$root" /usr/bin/env -C "$repo" HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    LANG=C.UTF-8 USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo "$@"
' bash "$ROOT" "$REPO" "$@"
