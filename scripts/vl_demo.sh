#!/usr/bin/env bash
# The vision-language quickstart, on an existing build: Debian's Fashion-MNIST (70,000 real 28x28
# photographs of clothing in 10 classes, package dataset-fashion-mnist) becomes captioned
# image-text JSON lines ("a photo of an ankle boot"); a small LLaVA model (a CLIP vision tower,
# frozen, a projector and a Llama decoder) trains on 2 ranks with FSDP2; megacpp-caption then
# captions the held-out test images greedily and prints the share it gets right (chance: 10%).
#
#   scripts/vl_demo.sh [BUILD_DIR] [WORK_DIR] [extra megacpp-train flags...]
#
# BUILD_DIR defaults to build/, WORK_DIR (data, checkpoint) to data/vl_demo/. VL_TRAIN_IMAGES
# (default 20000) and VL_TEST_IMAGES (default 2000) take the first N of each split.
set -euo pipefail
# Debian's OpenBLAS falls back to generic kernels on CPUs newer than itself: name a core it has
# (scripts/openblas_coretype.sh).
core=$(bash "$(dirname "$0")/openblas_coretype.sh") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
WORK_DIR=${2:-data/vl_demo}
shift $(( $# < 2 ? $# : 2 ))
TRAIN_IMAGES=${VL_TRAIN_IMAGES:-20000}
TEST_IMAGES=${VL_TEST_IMAGES:-2000}
# Fashion-MNIST's pixel mean and std (on [0, 1]), as its image processor would normalize.
IMAGES=(--img-h 28 --img-w 28 --num-channels 1 --image-mean 0.286 --image-std 0.353)

python3 scripts/fashion_mnist_jsonl.py "$WORK_DIR/data" --train "$TRAIN_IMAGES" --test "$TEST_IMAGES"
rm -rf "$WORK_DIR/checkpoints"
"$BUILD_DIR/megacpp-run" --nproc-per-node 2 --master-port 0 "$BUILD_DIR/megacpp-train" \
  --model-type llava --data-path "$WORK_DIR/data/train.jsonl" --split 98,2,0 --tokenizer-type ByteLevelTokenizer --seed 1234 \
  --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 48 \
  --vision-num-layers 2 --vision-hidden-size 32 --vision-num-attention-heads 2 --patch-dim 7 "${IMAGES[@]}" \
  --micro-batch-size 16 --global-batch-size 32 --train-iters 600 \
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 20 --lr-decay-style cosine \
  --eval-interval 100 --eval-iters 4 --log-interval 50 \
  --use-torch-fsdp2 --fsdp2-config-path configs/fsdp2/llava_frozen_tower.yaml \
  --save "$WORK_DIR/checkpoints" --save-interval 600 "$@"
"$BUILD_DIR/megacpp-caption" --load "$WORK_DIR/checkpoints" --data-path "$WORK_DIR/data/test.jsonl" --tokenizer-type ByteLevelTokenizer \
  "${IMAGES[@]:6}" --show 5
