#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, a PyTorch 2.x install and megacpp's other
# build dependencies (scripts/setup.sh's libraries; no package registry is needed):
#
#   scripts/gpu_check.sh [TORCH_CMAKE_PREFIX]     default: python3's torch.utils.cmake_prefix_path
#
# 1. builds the CUDA configuration into build-gpu/ (ProcessGroupNCCL, CUDA streams and memory
#    statistics compiled in);
# 2. trains a small Llama for 20 iterations through the whole engine (megacpp-run, FSDP2 with a
#    group per layer) on every visible GPU in bf16 with NCCL, and the same run on the CPU in fp32
#    (CUDA_VISIBLE_DEVICES= hides the GPUs; Gloo); every logged loss must agree within 2%
#    (bf16 keeps 8 bits of mantissa; the first losses of a run this small agree to ~0.5%);
#    then on one GPU in fp32 with and without CPU offload (offload_to_cpu: the shards, gradients
#    and optimizer state in pinned host memory): losses within 1e-4;
# 3. the GPU benchmark: a ~1B-parameter Llama (bf16, FSDP2) for 30 iterations, printing
#    megacpp's tokens/s, TFLOP/s per GPU and MFU against the device's bf16 dense peak.
#
# Record what it prints in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nvidia-smi >/dev/null || { echo "gpu_check: no nvidia-smi: this needs an NVIDIA GPU" >&2; exit 1; }
PREFIX="${1:-$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')}"
GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu_check: $GPUS x $NAME; libtorch from $PREFIX"

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMEGACPP_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$PREFIX" |
  tee "$SCRATCH/configure.log"
grep -q "megacpp: CUDA build" "$SCRATCH/configure.log" || { echo "gpu_check: libtorch at $PREFIX has no CUDA" >&2; exit 1; }
cmake --build build-gpu -j"$(nproc)"

# Dense bf16 peak TFLOP/s of one device (vendor data sheets), for MFU.
case "$NAME" in
  *H200*) PEAK=989 ;;
  *H100*PCIe*) PEAK=756 ;;
  *H100*) PEAK=989 ;;
  *A100*) PEAK=312 ;;
  *L40S*) PEAK=362 ;;
  *A10*) PEAK=125 ;;
  *) PEAK=0; echo "gpu_check: no known peak for '$NAME': MFU is not printed" ;;
esac

printf 'sub_modules_to_wrap:\n  - layers.{*}\n' >"$SCRATCH/layers.yaml"

printf 'sub_modules_to_wrap:\n  - layers.{*}\noffload_to_cpu: true\n' >"$SCRATCH/offload.yaml"

train() {  # RANKS LOG FLAGS... (CONFIG: another fsdp2_config.yaml)
  local ranks=$1 log=$2
  shift 2
  if ! build-gpu/megacpp-run --nproc-per-node "$ranks" --master-port 0 build-gpu/megacpp-train --model-type llama --mock-data \
    --use-torch-fsdp2 --fsdp2-config-path "${CONFIG:-$SCRATCH/layers.yaml}" --log-interval 1 --eval-iters 0 "$@" >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "gpu_check: the run failed (above)" >&2
    exit 1
  fi
  grep -E "iteration +[0-9]+/|memory" "$log"
}

SMALL=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --ffn-hidden-size 688 --seq-length 256
  --max-position-embeddings 256 --tokenizer-type NullTokenizer --vocab-size 8191 --make-vocab-size-divisible-by 1 --micro-batch-size 1
  --global-batch-size 8 --train-iters 20 --lr 1e-3 --seed 1234)
echo "gpu_check: small run on $GPUS GPU(s), bf16 with NCCL"
train "$GPUS" "$SCRATCH/gpu.log" "${SMALL[@]}" --bf16
echo "gpu_check: the same run on the CPU, fp32 with Gloo"
CUDA_VISIBLE_DEVICES= train "$GPUS" "$SCRATCH/cpu.log" "${SMALL[@]}"
cat >"$SCRATCH/compare.py" <<'EOF'
import re, sys
what, limit = sys.argv[3], float(sys.argv[4])
loss = lambda path: [float(x) for x in re.findall(r"\| lm loss: ([0-9.E+-]+)", open(path).read())]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
if len(a) != 20 or len(b) != 20:
    sys.exit(f"gpu_check: {what}: expected 20 losses each, got {len(a)} and {len(b)}")
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"gpu_check: {what}: largest relative difference of the losses {worst:.2e} (limit {limit})")
sys.exit(0 if worst <= limit else 1)
EOF
python3 "$SCRATCH/compare.py" "$SCRATCH/gpu.log" "$SCRATCH/cpu.log" "bf16 GPU against fp32 CPU" 0.02

echo "gpu_check: the small run on one GPU in fp32, with the shards on the device and offloaded to the host"
train 1 "$SCRATCH/device.log" "${SMALL[@]}"
CONFIG="$SCRATCH/offload.yaml" train 1 "$SCRATCH/offload.log" "${SMALL[@]}"
grep -q "fsdp2: CPU offload" "$SCRATCH/offload.log" || { echo "gpu_check: the offload run did not offload" >&2; exit 1; }
python3 "$SCRATCH/compare.py" "$SCRATCH/offload.log" "$SCRATCH/device.log" "CPU offload against none" 1e-4

echo "gpu_check: benchmark, Llama ~1B parameters, bf16, FSDP2 on $GPUS GPU(s)"
train "$GPUS" "$SCRATCH/bench.log" --num-layers 16 --hidden-size 2048 --num-attention-heads 16 \
  --num-query-groups 8 --ffn-hidden-size 5632 --seq-length 2048 --max-position-embeddings 2048 \
  --tokenizer-type NullTokenizer --vocab-size 31999 --micro-batch-size 4 --global-batch-size $((4 * GPUS)) --train-iters 30 --lr 1e-4 \
  --bf16 --peak-tflops "$PEAK"
grep -E "iteration +30/" "$SCRATCH/bench.log" | sed 's/^/gpu_check: /'
