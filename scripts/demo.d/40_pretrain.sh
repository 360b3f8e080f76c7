#!/usr/bin/env bash
# Pretraining: a `tiny` GPT on the corpus step's shards for its 900 steps on one CPU thread (preflight, supervisor,
# checkpoints), then the per-language evaluation against its random-init twin.
# A fixed step count, not a time budget: the model learns as much on a loaded machine as on an idle one,
# and one thread, because two torch threads on a busy 2-core machine ran a step six times slower. On a machine
# shared with other work a step can take several times the median for a while: the supervisor halts for a
# throughput collapse only after 60 slow steps in a row, not 5.
set -euo pipefail
echo "== 4. Pretrain: a tiny Bangla-first GPT on the demo shards (900 steps, a few minutes on CPU) =="
rm -rf "$OUT/pretrain"
pretrain launch --config tiny --data "$OUT/corpus" --out "$OUT/pretrain" \
  --max-steps "${DEMO_PRETRAIN_STEPS:-900}" --global-batch-tokens 1024 --micro-batch 8 \
  --set train.threads=1 --set train.preflight_steps=2 --set data.eval_tokens=4096 --set train.tensorboard=no \
  --set train.checkpoint_interval=200 --set train.eval_interval=200 --set supervisor.throughput_patience=60 --no-eval
pretrain eval --run "$OUT/pretrain" --max-tokens 4096 --samples 2
echo "Training log: $OUT/pretrain/metrics.jsonl; evaluation: $OUT/pretrain/eval.json (plot: $OUT/pretrain/eval.png)"
