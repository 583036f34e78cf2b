#!/usr/bin/env bash
# Supervised fine-tuning a person can watch learn, on an existing build. No model hub is
# reachable, so megacpp makes its own Hugging Face folder first:
#   1. data: the records of the packages installed on this machine (dpkg's status file), each
#      with a question about one of its fields (scripts/sft_demo_data.py); a seventh held out;
#   2. base model: a small Llama pretrained on the training packages' records on 2 ranks, then
#      exported by megacpp-convert into a Hugging Face folder with a byte-level tokenizer.json and
#      a ChatML chat template (scripts/byte_level_tokenizer.py);
#   3. fine-tuning from that folder (--init-from-hf-path) on the conversations, rendered by the
#      folder's chat template, packed (--pack) and trained with the loss on the answers only,
#      documents kept apart (--reset-attention-mask --reset-position-ids), FSDP2 on 2 ranks;
#   4. megacpp-answer's greedy exact-answer accuracy on the held-out packages, before and after,
#      and by question (scripts/sft_demo_by_question.py; every answer is in WORK_DIR/answers_*.txt).
#
#   scripts/sft_demo.sh [BUILD_DIR] [WORK_DIR] [extra megacpp-train flags for the fine-tuning...]
#
# BUILD_DIR defaults to build/, WORK_DIR to data/sft_demo/. SFT_PRETRAIN_ITERS (default 300) and
# SFT_ITERS (default 500) set the two runs' lengths.
set -euo pipefail
# Debian's OpenBLAS falls back to generic kernels on CPUs newer than itself: name a core it has
# (scripts/openblas_coretype.sh).
core=$(bash "$(dirname "$0")/openblas_coretype.sh") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
WORK_DIR=${2:-data/sft_demo}
shift $(( $# < 2 ? $# : 2 ))
PRETRAIN_ITERS=${SFT_PRETRAIN_ITERS:-300}
SFT_ITERS=${SFT_ITERS:-500}
STATUS=/var/lib/dpkg/status
[ -f "$STATUS" ] || { echo "sft_demo: $STATUS is missing: this demo reads a Debian system's package records" >&2; exit 1; }
RUN=("$BUILD_DIR/megacpp-run" --nproc-per-node 2 --master-port 0 "$BUILD_DIR/megacpp-train")
rm -rf "$WORK_DIR" && mkdir -p "$WORK_DIR"
start=$(date +%s)
seconds() { echo $(( $(date +%s) - start )); }

python3 scripts/sft_demo_data.py "$STATUS" "$WORK_DIR/data"
python3 scripts/byte_level_tokenizer.py "$WORK_DIR/tokenizer"
TOKENIZER=(--tokenizer-type HuggingFaceTokenizer --tokenizer-name-or-path "$WORK_DIR/tokenizer")

echo "== 1. the base model: pretraining on the package records ($PRETRAIN_ITERS iterations, 2 ranks)"
"$BUILD_DIR/megacpp-preprocess" --input "$WORK_DIR/data/pretrain.jsonl" --output-prefix "$WORK_DIR/data/pretrain" \
  "${TOKENIZER[@]}" --append-eod > /dev/null
"${RUN[@]}" --model-type llama --data-path "$WORK_DIR/data/pretrain_text_document" --split 100,0,0 "${TOKENIZER[@]}" \
  --num-layers 4 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 1024 \
  --micro-batch-size 8 --global-batch-size 16 --train-iters "$PRETRAIN_ITERS" --eval-iters 0 --seed 1234 \
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 30 --lr-decay-style cosine --log-interval 50 \
  --use-torch-fsdp2 --save "$WORK_DIR/base" --save-interval "$PRETRAIN_ITERS" | grep -E "iteration +[0-9]+/" || true
"$BUILD_DIR/megacpp-convert" export --load "$WORK_DIR/base" --output "$WORK_DIR/base-hf" > /dev/null
cp "$WORK_DIR/tokenizer/tokenizer.json" "$WORK_DIR/tokenizer/tokenizer_config.json" "$WORK_DIR/base-hf/"
echo "base model: $WORK_DIR/base-hf (a Hugging Face folder: $(ls "$WORK_DIR/base-hf" | tr '\n' ' '))"

echo "== 2. held-out accuracy of the base model"
ANSWER=("$BUILD_DIR/megacpp-answer" --input "$WORK_DIR/data/held_out.jsonl" --tokenizer-name-or-path "$WORK_DIR/base-hf"
        --max-new-tokens 40 --show 1000)
"$BUILD_DIR/megacpp-convert" import --input "$WORK_DIR/base-hf" --save "$WORK_DIR/base-imported" > /dev/null
"${ANSWER[@]}" --load "$WORK_DIR/base-imported" > "$WORK_DIR/answers_before.txt"
head -3 "$WORK_DIR/answers_before.txt" && tail -1 "$WORK_DIR/answers_before.txt"

echo "== 3. fine-tuning from the folder on the conversations ($SFT_ITERS iterations, 2 ranks)"
"$BUILD_DIR/megacpp-preprocess" --input "$WORK_DIR/data/train.jsonl" --output-prefix "$WORK_DIR/data/sft" \
  --handler-name AlpacaStyleInstructionHandler --tokenizer-type HuggingFaceTokenizer --tokenizer-name-or-path "$WORK_DIR/base-hf" \
  --seq-length 512 --pack
"${RUN[@]}" --init-from-hf-path "$WORK_DIR/base-hf" --stage sft --is-instruction-dataset --data-path "$WORK_DIR/data/sft" \
  --reset-attention-mask --reset-position-ids --split 100,0,0 --seq-length 512 \
  --micro-batch-size 4 --global-batch-size 8 --train-iters "$SFT_ITERS" --eval-iters 0 --seed 1234 \
  --lr 2e-3 --min-lr 2e-4 --lr-warmup-iters 20 --lr-decay-style cosine --log-interval 50 \
  --use-torch-fsdp2 --save "$WORK_DIR/sft" --save-interval "$SFT_ITERS" "$@" | grep -E "iteration +[0-9]+/" || true

echo "== 4. held-out accuracy after fine-tuning"
"${ANSWER[@]}" --load "$WORK_DIR/sft" > "$WORK_DIR/answers_after.txt"
head -3 "$WORK_DIR/answers_after.txt" && tail -1 "$WORK_DIR/answers_after.txt"
echo
for when in before after; do
  echo "$when fine-tuning: $(tail -1 "$WORK_DIR/answers_$when.txt")"
  python3 scripts/sft_demo_by_question.py "$WORK_DIR/data/held_out.jsonl" "$WORK_DIR/answers_$when.txt"
done
echo "sft_demo: $(seconds) s in all"
