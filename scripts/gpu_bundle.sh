#!/usr/bin/env bash
# Gathers, as Debian 12 (bookworm) packages, every library and header megacpp's build needs
# beyond libtorch, CUDA and NCCL, for a GPU machine that has its own PyTorch but no package
# registry (scripts/gpu_check.sh unpacks it there):
#
#   scripts/gpu_bundle.sh [DIR]      default .cache/gpu-bundle (git ignores .cache/)
#
# DIR/debs/ holds the .deb files: the -dev packages below, then, found by reading the ELF
# dependencies of what they hold, every runtime library those need (until nothing is missing),
# except glibc's, libstdc++ and libgcc_s, which any machine with a C++ compiler has. bookworm's
# packages need glibc 2.36 at most, so they run on an Ubuntu 24.04-like image. The bundle also
# holds pkgconf, which CMake's pkg_check_modules needs where the machine has no pkg-config.
#
# Gloo's headers: libtorch compiles Gloo in but a PyTorch wheel ships none of its headers, and
# ProcessGroupGloo.hpp includes them. bookworm's Gloo (2022) is older than any PyTorch 2.x's, so
# the headers come from Debian unstable's libgloo-dev (headers only; nothing of it is linked).
#
# Runs on a Debian 12 machine where scripts/setup.sh has installed the same packages (the runtime
# libraries are looked up with dpkg -S there). Writes DIR/MANIFEST, one package and version a line.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-.cache/gpu-bundle}"

DEV_PACKAGES=(libyaml-cpp-dev libcxxopts-dev libspdlog-dev libfmt-dev libhdf5-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev libsentencepiece-dev libstb-dev zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
# Loaded by every C++ program: never carried.
BASE_SONAMES='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'

[ "$(. /etc/os-release && echo "$VERSION_CODENAME")" = bookworm ] ||
  { echo "gpu_bundle: run this on Debian 12 (bookworm): its packages are what the GPU machine's glibc can run" >&2; exit 1; }
for p in "${DEV_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "gpu_bundle: $p is not installed here: run scripts/setup.sh first" >&2; exit 1; }
done

# Made in a scratch folder and moved into place at the end: a failed run leaves no half bundle.
FINAL=$(realpath -m "$DIR")
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
DIR="$SCRATCH/bundle"
mkdir -p "$DIR/debs"

download() {  # PACKAGE... -> DIR/debs, unpacked into $SCRATCH/root
  (cd "$DIR/debs" && apt-get download -q "$@" >/dev/null 2>"$SCRATCH/download.log") ||
    { cat "$SCRATCH/download.log" >&2; echo "gpu_bundle: apt-get download $* failed" >&2; exit 1; }
  for p in "$@"; do dpkg -x "$DIR/debs/${p}_"*.deb "$SCRATCH/root"; done
}

# The libraries that the unpacked files need and none provides: the sonames their ELF files
# need, and the targets of the -dev packages' libNAME.so links.
missing_sonames() {
  local elf
  {
    find "$SCRATCH/root" -type f \( -name '*.so*' -o -path '*/bin/*' \) | while read -r elf; do
      readelf -d "$elf" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
    done
    # Links whose target is not in the unpacked tree (an absolute one is read inside it).
    find "$SCRATCH/root" -type l -name '*.so*' | while read -r link; do
      target=$(readlink "$link")
      case "$target" in /*) path="$SCRATCH/root$target" ;; *) path="$(dirname "$link")/$target" ;; esac
      [ -e "$path" ] || basename "$target"
    done
  } | sort -u | grep -Ev "$BASE_SONAMES" | while read -r soname; do
    [ -n "$(find "$SCRATCH/root" -name "$soname" -print -quit)" ] || echo "$soname"
  done
}

download "${DEV_PACKAGES[@]}"
for round in 1 2 3 4 5 6 7 8; do
  needed=()
  for soname in $(missing_sonames); do
    owner=$(dpkg -S "*/$soname" 2>/dev/null | grep -v -- '-dev:' | head -1 | cut -d: -f1) ||
      true
    [ -n "$owner" ] || { echo "gpu_bundle: no installed package holds $soname" >&2; exit 1; }
    needed+=("$owner")
  done
  [ ${#needed[@]} -gt 0 ] || break
  mapfile -t needed < <(printf '%s\n' "${needed[@]}" | sort -u)
  echo "gpu_bundle: round $round of runtime libraries: ${needed[*]}"
  download "${needed[@]}"
done
[ -z "$(missing_sonames)" ] || { echo "gpu_bundle: still missing: $(missing_sonames)" >&2; exit 1; }

# Gloo's headers from Debian unstable, through a private package list (the same mirror).
MIRROR=$(bash scripts/debian_mirror.sh)
mkdir -p "$SCRATCH/sid/lists/partial" "$SCRATCH/sid/cache/archives/partial"
echo "deb $MIRROR sid main" >"$SCRATCH/sid/sources.list"
SID=(-oDir::Etc::SourceList="$SCRATCH/sid/sources.list" -oDir::Etc::SourceParts=/dev/null
  -oDir::State::Lists="$SCRATCH/sid/lists" -oDir::Cache="$SCRATCH/sid/cache")
timeout 600 apt-get "${SID[@]}" update -qq >"$SCRATCH/sid.log" 2>&1 ||
  { cat "$SCRATCH/sid.log" >&2; echo "gpu_bundle: apt-get update of Debian unstable's list failed" >&2; exit 1; }
(cd "$DIR/debs" && timeout 600 apt-get "${SID[@]}" download -q libgloo-dev >/dev/null 2>"$SCRATCH/sid.log") ||
  { cat "$SCRATCH/sid.log" >&2; echo "gpu_bundle: downloading libgloo-dev from Debian unstable failed" >&2; exit 1; }

for deb in "$DIR"/debs/*.deb; do dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"; done >"$DIR/MANIFEST"
rm -rf "$FINAL"
mkdir -p "$(dirname "$FINAL")"
mv "$DIR" "$FINAL"
echo "gpu_bundle: $(wc -l <"$FINAL/MANIFEST") packages, $(du -sh "$FINAL/debs" | cut -f1), in $FINAL"
