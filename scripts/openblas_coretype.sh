#!/usr/bin/env bash
# Prints the OPENBLAS_CORETYPE this machine's OpenBLAS should be given, or nothing. Bookworm's
# OpenBLAS (0.3.21, DYNAMIC_ARCH) does not know CPUs newer than itself (Intel's Emerald Rapids,
# family 6 model 207) and falls back to its generic Prescott kernels, about 3x slower at sgemm,
# which is most of a training step on the CPU. When it reports Prescott on a CPU that runs
# AVX-512 (SkylakeX's kernels) or AVX2 with FMA (Haswell's), this names that core; when the
# environment already sets OPENBLAS_CORETYPE, or OpenBLAS knows the CPU, it prints nothing.
#
#   core=$(bash scripts/openblas_coretype.sh) && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
set -euo pipefail
[ -n "${OPENBLAS_CORETYPE:-}" ] && exit 0
exec python3 - <<'PY'
import ctypes

try:
    blas = ctypes.CDLL("libopenblas.so.0")
except OSError:
    raise SystemExit(0)
blas.openblas_get_corename.restype = ctypes.c_char_p
if blas.openblas_get_corename() != b"Prescott":
    raise SystemExit(0)
flags = set()
with open("/proc/cpuinfo") as cpuinfo:
    for line in cpuinfo:
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
    print("SkylakeX")
elif {"avx2", "fma"} <= flags:
    print("Haswell")
PY
