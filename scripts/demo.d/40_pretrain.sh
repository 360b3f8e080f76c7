#!/usr/bin/env bash
# Pretraining: a `tiny` GPT on the corpus step's shards for about a minute of CPU (preflight, supervisor,
# checkpoints), then the per-language evaluation against its random-init twin.
set -euo pipefail
echo "== 4. Pretrain: a tiny Bangla-first GPT on the demo shards (about a minute on CPU) =="
rm -rf "$OUT/pretrain"
pretrain launch --config tiny --data "$OUT/corpus" --out "$OUT/pretrain" \
  --max-steps 0 --time-budget-s "${DEMO_PRETRAIN_SECONDS:-60}" --global-batch-tokens 1024 --micro-batch 8 \
  --set train.preflight_steps=1 --set data.eval_tokens=4096 --set train.tensorboard=no \
  --set train.checkpoint_interval=25 --set train.eval_interval=25 --no-eval
pretrain eval --run "$OUT/pretrain" --max-tokens 4096 --samples 2
echo "Training log: $OUT/pretrain/metrics.jsonl; evaluation: $OUT/pretrain/eval.json (plot: $OUT/pretrain/eval.png)"
