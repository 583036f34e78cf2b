#!/usr/bin/env bash
# For scripts/gpu_check.sh --dry-run, which runs it in a private mount namespace (unshare):
#
#   gpu_dry_run_hide.sh BUNDLE COMMAND...     hides from this machine what the bundle's -dev
#                                             packages installed here (their headers, CMake package
#                                             files; h5cc), then runs COMMAND
#   gpu_dry_run_hide.sh --check-build BUILD   fails if BUILD compiles or links any of the
#                                             bundle's libraries from this machine's /usr
#
# So the dry run builds from the bundle alone, as the GPU machine must: a header still found in
# /usr/include fails with an #error naming this script. Runtime libraries stay (the compiler and
# CMake need some of them); gpu_check.sh puts every bundled one first on LD_LIBRARY_PATH.
set -euo pipefail

if [ "${1:-}" = --check-build ]; then
  BUILD=$2
  libs='lib(yaml-cpp|spdlog|fmt|hdf5[a-z_]*|pcre2-8|utf8proc|sentencepiece)\.so'
  if grep -rEho "(^|[ ;\"])/usr/lib/x86_64-linux-gnu/(hdf5/serial/)?$libs[.0-9]*" "$BUILD"/build.ninja "$BUILD"/CMakeFiles 2>/dev/null | sort -u | grep .; then
    echo "gpu_dry_run_hide: the build above links libraries of this machine's instead of the bundle's" >&2
    exit 1
  fi
  DEPS=${MEGACPP_GPU_DEPS:-/tmp/megacpp-gpu-deps}
  loads=$(ldd "$BUILD/megacpp-train") || { echo "gpu_dry_run_hide: ldd $BUILD/megacpp-train failed" >&2; exit 1; }
  if grep -E "$libs" <<<"$loads" | grep -vF "$DEPS/" | grep .; then
    echo "gpu_dry_run_hide: megacpp-train loads the libraries above from this machine, not the bundle" >&2
    exit 1
  fi
  outside=$(find "$DEPS" -type l -lname '/*' ! -lname "$DEPS/*")
  if [ -n "$outside" ]; then
    echo "gpu_dry_run_hide: links in the unpacked bundle that point outside it: $outside" >&2
    exit 1
  fi
  echo "gpu_dry_run_hide: $BUILD compiled and linked the bundle's libraries only"
  exit 0
fi

BUNDLE=$1
shift
[ -f "$BUNDLE/MANIFEST" ] || { echo "gpu_dry_run_hide: $BUNDLE has no MANIFEST (is it a whole bundle?)" >&2; exit 1; }
HIDDEN=$(mktemp -d)
mkdir "$HIDDEN/dir"
echo '#error "hidden by scripts/gpu_dry_run_hide.sh: this header must come from the GPU bundle"' >"$HIDDEN/header"
: >"$HIDDEN/file"
hide() {  # PATH
  if [ -d "$1" ]; then mount --bind "$HIDDEN/dir" "$1"
  elif [[ "$1" == /usr/include/* ]]; then mount --bind "$HIDDEN/header" "$1"
  else mount --bind "$HIDDEN/file" "$1"; fi
}
count=0
for package in $(awk '$1 ~ /-dev$/ { print $1 }' "$BUNDLE/MANIFEST") hdf5-helpers; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || continue
  while read -r path; do
    hide "$path"
    count=$((count + 1))
  done < <(dpkg -L "$package" | grep -E '^/usr/(include/([^/]+|x86_64-linux-gnu/[^/]+)|lib/x86_64-linux-gnu/cmake/[^/]+|lib/cmake/[^/]+|share/cmake/[^/]+|bin/h5[^/]+)$' |
    grep -vx /usr/include/x86_64-linux-gnu)
done
echo "gpu_dry_run_hide: hid $count headers, header folders and CMake/h5cc files of the bundle's packages"
exec "$@"
