#!/usr/bin/env bash
# On a fresh Debian machine: installs the dependencies, builds, and trains a small Llama-style
# model with FSDP2 on 2 ranks (synthetic data, each decoder layer its own shard group).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/megacpp-run --nproc-per-node 2 --master-port 0 ./build/megacpp-train \
  --mock-data --seed 1234 \
  --num-layers 4 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 8 --num-query-groups 4 \
  --vocab-size 512 --seq-length 64 --micro-batch-size 4 --global-batch-size 16 \
  --train-iters 100 --log-interval 10 --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 10 --lr-decay-style cosine \
  --use-torch-fsdp2 --fsdp2-config-path configs/fsdp2/llama_layers.yaml "$@"
