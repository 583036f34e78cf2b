#!/usr/bin/env bash
# Reinforcement learning with a verifiable reward a person can watch work, on an existing build:
#   1. data made on the fly: sums "a+b=" of two numbers below 20 with their answers; a quarter of
#      the pairs held out (never seen in any training);
#   2. a small Llama pretrained on the training sums written out ("12+7=19", byte-level tokens,
#      each sum a document of its own) on 2 ranks, where two in three are written off by one
#      ("12+7=20"): it learns both, and answers a+b+1 greedily more often than a+b;
#   3. GRPO from that checkpoint (megacpp-grpo --finetune): the training prompts only, the reward 1
#      for the exact (right) answer, groups of 8 sampled responses to 32 prompts a step, the actor
#      sharded by FSDP2 on 2 ranks and the rollout on a third rank of its own, fed the weights
#      after every step: the reward picks a+b out of what the model knows;
#   4. the held-out exact-answer reward of greedy answers, before and after (printed by
#      megacpp-grpo; the whole log is in WORK_DIR/grpo.log).
#
#   scripts/rl_demo.sh [BUILD_DIR] [WORK_DIR] [extra megacpp-grpo flags...]
#
# BUILD_DIR defaults to build/, WORK_DIR to data/rl_demo/. RL_PRETRAIN_ITERS (default 1000) and
# RL_STEPS (default 60) set the two runs' lengths; RL_ROLLOUT_RANKS=0 colocates the rollout.
# About a minute on 2 cores; measured: 0.15 before, 0.96 after (docs/cli.md, megacpp-grpo).
set -euo pipefail
core=$(bash "$(dirname "$0")/openblas_coretype.sh") && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
WORK_DIR=${2:-data/rl_demo}
shift $(( $# < 2 ? $# : 2 ))
PRETRAIN_ITERS=${RL_PRETRAIN_ITERS:-1000}
STEPS=${RL_STEPS:-60}
ROLLOUT_RANKS=${RL_ROLLOUT_RANKS:-1}
rm -rf "$WORK_DIR" && mkdir -p "$WORK_DIR"
start=$(date +%s)
seconds() { echo $(( $(date +%s) - start )); }

python3 - "$WORK_DIR" <<'PY'
import json, random, sys
work = sys.argv[1]
pairs = [(a, b) for a in range(20) for b in range(20)]
random.Random(7).shuffle(pairs)
held_out, train = pairs[:100], pairs[100:]
def write(name, rows, line):
    with open(f"{work}/{name}", "w") as f:
        for a, b in rows:
            f.write(json.dumps(line(a, b)) + "\n")
# Two in three written-out sums are off by one: the pretrained model answers a+b+1 greedily more
# often than a+b, though it samples the right answer often enough for the reward to find it.
with open(f"{work}/sums.jsonl", "w") as f:
    for a, b in train:
        for wrong in (0, 1, 1):
            f.write(json.dumps({"text": f"{a}+{b}={a + b + wrong}"}) + "\n")
write("train_prompts.jsonl", train, lambda a, b: {"prompt": f"{a}+{b}=", "answer": str(a + b)})
write("held_out_prompts.jsonl", held_out, lambda a, b: {"prompt": f"{a}+{b}=", "answer": str(a + b)})
PY
MODEL=(--model-type llama --num-layers 2 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 4 --num-query-groups 2
       --tokenizer-type ByteLevelTokenizer --seq-length 32 --max-position-embeddings 32 --seed 1234)

echo "== 1. pretraining on $(wc -l < "$WORK_DIR/sums.jsonl") written-out sums ($PRETRAIN_ITERS iterations, 2 ranks)"
"$BUILD_DIR/megacpp-preprocess" --input "$WORK_DIR/sums.jsonl" --output-prefix "$WORK_DIR/sums" \
  --tokenizer-type ByteLevelTokenizer --append-eod > /dev/null
"$BUILD_DIR/megacpp-run" --nproc-per-node 2 --master-port 0 "$BUILD_DIR/megacpp-train" "${MODEL[@]}" \
  --data-path "$WORK_DIR/sums_text_document" --split 100,0,0 --reset-position-ids --reset-attention-mask \
  --micro-batch-size 16 --global-batch-size 32 --train-iters "$PRETRAIN_ITERS" --eval-iters 0 \
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 10 --lr-decay-style cosine --log-interval 20 \
  --use-torch-fsdp2 --save "$WORK_DIR/pretrained" --save-interval "$PRETRAIN_ITERS" | grep -E "iteration +[0-9]+/" || true

echo "== 2. GRPO on the training prompts ($STEPS steps; actor on 2 ranks, rollout ranks: $ROLLOUT_RANKS) after $(seconds) s"
"$BUILD_DIR/megacpp-run" --nproc-per-node $(( 2 + ROLLOUT_RANKS )) --master-port 0 "$BUILD_DIR/megacpp-grpo" "${MODEL[@]}" \
  --prompts "$WORK_DIR/train_prompts.jsonl" --eval-prompts "$WORK_DIR/held_out_prompts.jsonl" --eval-interval 20 \
  --rollout-ranks "$ROLLOUT_RANKS" --rollout-batch-size 32 --num-return-sequences-in-group 8 --response-length 4 \
  --temperature 1.0 --kl-coef 0.001 --ppo-micro-batch-size 32 \
  --load "$WORK_DIR/pretrained" --finetune --lr 2e-4 --clip-grad 1.0 --train-iters "$STEPS" \
  --use-torch-fsdp2 --save "$WORK_DIR/grpo" --save-interval "$STEPS" "$@" > "$WORK_DIR/grpo.log" 2>&1 \
  || { tail -20 "$WORK_DIR/grpo.log"; exit 1; }
grep -E "grpo (eval|step [0-9]+0/)" "$WORK_DIR/grpo.log" | sed 's/^\[rank0\]: //'
before=$(grep "grpo eval" "$WORK_DIR/grpo.log" | head -1 | sed -E 's/.*reward ([0-9.]+).*/\1/')
after=$(grep "grpo eval" "$WORK_DIR/grpo.log" | tail -1 | sed -E 's/.*reward ([0-9.]+).*/\1/')
echo "held-out exact-answer reward (greedy): $before before GRPO, $after after; $(seconds) s in all"
