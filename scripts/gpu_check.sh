#!/usr/bin/env bash
# The GPU check: builds megacpp on a machine with an NVIDIA GPU and its own PyTorch (no package
# registry needed) and checks and measures it there against PyTorch (bench/gpu_check.py):
#
#   scripts/gpu_check.sh [--dry-run] [--torch CMAKE_PREFIX]
#
# 1. Unpacks the Debian 12 packages of .cache/gpu-bundle (made beforehand by scripts/gpu_bundle.sh
#    on a Debian 12 machine, then carried) into a prefix outside / ($MEGACPP_GPU_DEPS, default
#    /tmp/megacpp-gpu-deps). megacpp links its direct dependencies from there (RUNPATH); of what
#    those need in turn, what the machine lacks is put on LD_LIBRARY_PATH.
# 2. Configures build-gpu/ against python3's PyTorch (torch.utils.cmake_prefix_path, or
#    --torch) and the bundle, with ninja when there is one, and builds megacpp-train and
#    megacpp-run with every core, printing the build time.
# 3. Runs bench/gpu_check.py: bf16 and fp32 on the GPU against fp32 on the CPU, CPU offload,
#    recompute, meta-device init and one stream, then megacpp (side streams), megacpp on one
#    stream and PyTorch's fully_shard side by side, and the same with CPU offload (megacpp only).
#    Logs, gpu_check.json and gpu_check.md go to build-gpu/gpu_check/, and to $OUT when it is
#    set (the device tool brings that back; the logs packed in gpu_check_logs.tar.gz).
#
# --dry-run, for a Debian 12 machine without a GPU (as root): does all of the above that needs no
# GPU, with the bundle's -dev packages hidden from the machine (their headers, CMake package
# files and h5cc, in a private mount namespace; pkg-config reads only the bundle's .pc files
# anyway, with the bundled pkgconf), every bundled library used, and the CPU runs only; it says
# what it skipped. Relative paths (--torch, $MEGACPP_GPU_*) are taken from where it is started.
set -euo pipefail
SELF=$(realpath "$0")
absolute() { realpath -m "$1"; }  # paths given are relative to where the script was started

DRY_RUN=0
TORCH_PREFIX=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --torch) TORCH_PREFIX=$(absolute "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
  shift
done
fail() { echo "gpu_check: $*" >&2; exit 1; }

REPO=$(dirname "$(dirname "$SELF")")
BUNDLE=$(absolute "${MEGACPP_GPU_BUNDLE:-$REPO/.cache/gpu-bundle}")
DEPS=$(absolute "${MEGACPP_GPU_DEPS:-/tmp/megacpp-gpu-deps}")
BUILD=$(absolute "${MEGACPP_GPU_BUILD:-$REPO/build-gpu}")
RESULTS=$BUILD/gpu_check
cd "$REPO"
[ -f "$BUNDLE/MANIFEST" ] && [ -d "$BUNDLE/debs" ] ||
  fail "no bundle at $BUNDLE: make it on a Debian 12 machine with 'bash scripts/gpu_bundle.sh' and carry it"

if [ "$DRY_RUN" = 1 ] && [ -z "${MEGACPP_GPU_HIDDEN:-}" ]; then
  [ "$(id -u)" = 0 ] || fail "--dry-run hides the bundle's packages in a mount namespace: run it as root"
  exec unshare --mount --propagation private env MEGACPP_GPU_HIDDEN=1 MEGACPP_GPU_BUNDLE="$BUNDLE" \
    MEGACPP_GPU_DEPS="$DEPS" MEGACPP_GPU_BUILD="$BUILD" bash scripts/gpu_dry_run_hide.sh "$BUNDLE" \
    bash "$SELF" --dry-run ${TORCH_PREFIX:+--torch "$TORCH_PREFIX"}
fi

# python3's PyTorch, asked once (importing it takes seconds): version, CUDA, whether it sees a
# GPU, compute capability, CMake prefix, include folder, where it is. Empty: python3 has no torch.
TORCH_FACTS=$(python3 -c 'import os, torch, torch.utils
cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), "%d.%d" % cap, torch.utils.cmake_prefix_path,
      os.path.join(os.path.dirname(torch.__file__), "include"), torch.__file__, sep="\n")' 2>/dev/null) || TORCH_FACTS=""
{ read -r TORCH_VERSION; read -r TORCH_CUDA; read -r TORCH_SEES; read -r ARCH; read -r TORCH_CMAKE_PREFIX
  read -r TORCH_INCLUDE; read -r TORCH_FILE; } <<<"$TORCH_FACTS" || true

# The machine: a GPU, and a PyTorch that has CUDA.
NAME="no GPU (dry run)"
if [ "$DRY_RUN" = 0 ]; then
  command -v nvidia-smi >/dev/null || fail "no nvidia-smi: this needs an NVIDIA GPU (--dry-run goes as far as it can without one)"
  GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader) || fail "nvidia-smi failed: is the NVIDIA driver loaded?"
  NAME=$(head -1 <<<"$GPUS")
  [ -n "$NAME" ] || fail "nvidia-smi lists no GPU"
  [ -n "$TORCH_FACTS" ] || fail "python3 ($(command -v python3)) has no torch (or importing it failed)"
  [ "$TORCH_CUDA" != None ] || fail "PyTorch $TORCH_VERSION ($TORCH_FILE) has no CUDA (torch.version.cuda is None)"
  [ "$TORCH_SEES" = True ] || fail "PyTorch $TORCH_VERSION (CUDA $TORCH_CUDA) sees no GPU (torch.cuda.is_available() is False)"
  echo "gpu_check: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1); PyTorch $TORCH_VERSION, CUDA $TORCH_CUDA, compute capability $ARCH"
fi
TORCH_PREFIX=${TORCH_PREFIX:-${TORCH_CMAKE_PREFIX:-}}
[ -n "$TORCH_PREFIX" ] || fail "python3 has no torch: give --torch with a libtorch's CMake prefix"

# 1. The bundle, unpacked; the libraries the machine lacks (all of them in a dry run) on the path.
rm -rf "$DEPS"
mkdir -p "$DEPS/fallback-lib"
command -v dpkg-deb >/dev/null || fail "no dpkg-deb here to unpack the bundle's packages"
for deb in "$BUNDLE"/debs/*.deb; do dpkg-deb -x "$deb" "$DEPS"; done
# Some bookworm packages (zlib1g) install into /lib, which merged-/usr machines link to /usr/lib,
# and their -dev links in /usr/lib point there: merge the two as such a machine does.
# Links to absolute paths (zlib1g-dev's libz.so -> /lib/...) are made to point into $DEPS.
if [ -d "$DEPS/lib" ]; then cp -a "$DEPS/lib/." "$DEPS/usr/lib/" && rm -rf "$DEPS/lib"; fi
find "$DEPS" -type l -lname '/*' | while read -r link; do
  target=$(readlink "$link")
  ln -sfn "$DEPS/usr${target#/usr}" "$link"
done
if [ -n "${TORCH_INCLUDE:-}" ] && [ -d "$TORCH_INCLUDE/gloo" ]; then rm -rf "$DEPS/usr/include/gloo"; fi  # libtorch's own Gloo headers win
# The libraries megacpp links come from $DEPS (CMake writes their folders into the programs'
# RUNPATH). What those need in turn (libcurl for HDF5, ...) comes from the machine where it has
# the soname, else from $DEPS/fallback-lib, on LD_LIBRARY_PATH (every bundled one in a dry run).
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
system_libs=$("$LDCONFIG" -p | awk 'NR > 1 { print $1 }') || fail "$LDCONFIG -p failed: cannot tell which libraries this machine has"
for lib in $(find "$DEPS/usr/lib/x86_64-linux-gnu" -maxdepth 3 -type f -name '*.so.*'); do
  soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ -n "$soname" ] || continue
  if [ "$DRY_RUN" = 1 ] || ! grep -qxF "$soname" <<<"$system_libs"; then ln -sf "$lib" "$DEPS/fallback-lib/$soname"; fi
done
export LD_LIBRARY_PATH="$DEPS/fallback-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "gpu_check: $(wc -l <"$BUNDLE/MANIFEST") packages unpacked into $DEPS; $(find "$DEPS/fallback-lib" -type l | wc -l) sonames this machine lacks served from them"

# 2. Configure and build. pkg-config reads only the bundle's .pc files, its paths under $DEPS.
export PKG_CONFIG_SYSROOT_DIR="$DEPS"
export PKG_CONFIG_LIBDIR="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig"
PKG_CONFIG=$(command -v pkg-config || command -v pkgconf || echo "$DEPS/usr/bin/pkgconf")
[ "$DRY_RUN" = 0 ] || PKG_CONFIG="$DEPS/usr/bin/pkgconf"  # the bundled one, as a machine without any uses
CONFIGURE=(-DCMAKE_BUILD_TYPE=Release -DMEGACPP_BUILD_TESTS=OFF "-DCMAKE_PREFIX_PATH=$DEPS/usr;$TORCH_PREFIX"
  -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG")
command -v ninja >/dev/null && [ ! -f "$BUILD/Makefile" ] && CONFIGURE+=(-G Ninja)
if [ "$DRY_RUN" = 0 ]; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  CONFIGURE+=(-DCMAKE_CUDA_COMPILER="$NVCC" -DTORCH_CUDA_ARCH_LIST="$ARCH")
fi
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
# The device tool brings back at most 8 files from $OUT: the report, its figures and the logs packed.
if [ -n "${OUT:-}" ]; then
  trap 'cp "$RESULTS"/gpu_check.{md,json} "$OUT"/ 2>/dev/null || true; tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$RESULTS" .' EXIT
fi
start=$SECONDS
rm -f "$BUILD/CMakeCache.txt"  # the libraries found last time may lie in a bundle unpacked otherwise
cmake -S . -B "$BUILD" "${CONFIGURE[@]}" >"$RESULTS/configure.log" 2>&1 || { tail -40 "$RESULTS/configure.log" >&2; fail "configure failed (above; $RESULTS/configure.log)"; }
if [ "$DRY_RUN" = 0 ]; then
  grep -q "megacpp: CUDA build" "$RESULTS/configure.log" || fail "libtorch at $TORCH_PREFIX has no CUDA (configure.log says no CUDA build)"
fi
cmake --build "$BUILD" -j"$(nproc)" --target megacpp-train megacpp-run >"$RESULTS/build.log" 2>&1 ||
  { grep -v '^\[' "$RESULTS/build.log" | cut -c1-400 | head -60 >&2; fail "the build failed (above; $RESULTS/build.log)"; }
echo "gpu_check: configured and built megacpp-train and megacpp-run in $((SECONDS - start)) s on $(nproc) cores"
if [ "$DRY_RUN" = 1 ]; then bash scripts/gpu_dry_run_hide.sh --check-build "$BUILD"; fi

# 3. The runs. Dense bf16 peak TFLOP/s of one device (vendor data sheets), for MFU.
case "$NAME" in
  *H200*) PEAK=989 ;;
  *H100*PCIe*) PEAK=756 ;;
  *H100*) PEAK=989 ;;
  *A100*) PEAK=312 ;;
  *L40S*) PEAK=362 ;;
  *) PEAK=0; [ "$DRY_RUN" = 1 ] || echo "gpu_check: no known peak for '$NAME': MFU is not printed" ;;
esac
RUNS=(--build "$BUILD" --out "$RESULTS" --peak-tflops "$PEAK" --device-name "$NAME")
[ "$DRY_RUN" = 0 ] || RUNS+=(--dry-run)
python3 bench/gpu_check.py "${RUNS[@]}" ${MEGACPP_GPU_CHECK_ARGS:-}
