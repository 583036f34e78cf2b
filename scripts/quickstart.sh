#!/usr/bin/env bash
# The quickstart job, on an existing build: turns the English text of Debian's `fortunes`
# package into a Megatron dataset (byte-level tokens) and trains a small Llama-style model on
# 2 ranks with FSDP2, validating on a held-out 2% of the fortunes.
#
#   scripts/quickstart.sh [BUILD_DIR] [WORK_DIR] [extra megacpp-train flags...]
#
# BUILD_DIR defaults to build/, WORK_DIR (dataset, TensorBoard events) to data/quickstart/.
set -euo pipefail
# Debian's OpenBLAS falls back to generic kernels on CPUs newer than itself: name a core it has
# (scripts/openblas_coretype.sh).
core=$(bash "$(dirname "$0")/openblas_coretype.sh") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
WORK_DIR=${2:-data/quickstart}
shift $(( $# < 2 ? $# : 2 ))
FORTUNES=/usr/share/games/fortunes
[ -d "$FORTUNES" ] || { echo "quickstart: $FORTUNES is missing: install Debian's 'fortunes' (scripts/setup.sh does)" >&2; exit 1; }
mkdir -p "$WORK_DIR"

# One fortune per document ('%' lines separate them), in a fixed pseudo-random order so the
# validation split (the last 2% of documents) is drawn from every fortune file, not just the
# last ones alphabetically.
if [ ! -f "$WORK_DIR/fortunes_text_document.idx" ]; then
  find "$FORTUNES" -maxdepth 1 -type f ! -name '*.dat' | sort |
    xargs awk 'BEGIN { RS = "\n%\n" } NF { gsub(/\n/, "\001"); printf "%d\t%s\n", (NR * 2654435761) % 4294967291, $0 }' |
    sort -n -k1,1 | cut -f2- | awk '{ gsub(/\001/, "\n"); print; print "%" }' > "$WORK_DIR/fortunes.txt"
  "$BUILD_DIR/megacpp-preprocess" --input "$WORK_DIR/fortunes.txt" --input-format text --document-separator % \
    --output-prefix "$WORK_DIR/fortunes" --tokenizer-type ByteLevelTokenizer --append-eod --workers 2
fi

"$BUILD_DIR/megacpp-run" --nproc-per-node 2 --master-port 0 "$BUILD_DIR/megacpp-train" \
  --model-type llama --data-path "$WORK_DIR/fortunes_text_document" --split 98,2,0 --tokenizer-type ByteLevelTokenizer --seed 1234 \
  --num-layers 4 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 4 --seq-length 128 \
  --micro-batch-size 8 --global-batch-size 16 --train-iters 500 \
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 50 --lr-decay-style cosine \
  --eval-interval 10 --eval-iters 4 --log-interval 25 \
  --use-torch-fsdp2 --fsdp2-config-path configs/fsdp2/llama_layers.yaml \
  --tensorboard-dir "$WORK_DIR/tensorboard" "$@"
