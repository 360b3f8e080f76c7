#!/usr/bin/env bash
# Corpus: clean, dedup and mix the shipped sample 70/30 Bangla/English in *tokens*, write shards, verify them.
set -euo pipefail
# The tokenizer trained by step 2 (its path is in $OUT/tokenizer_path); DEMO_TOKENIZER overrides it.
TOKENIZER=${DEMO_TOKENIZER:-$(cat "$OUT/tokenizer_path" 2>/dev/null || echo gpt2)}
COMPARE=(--compare-tokenizer o200k_base)
if [ "$TOKENIZER" != gpt2 ]; then COMPARE+=(--compare-tokenizer gpt2); fi
echo "== 3. Corpus: a Bangla-first mixture in tokens of $TOKENIZER =="
corpus build --tokenizer "$TOKENIZER" "${COMPARE[@]}" \
  --source bn=$SAMPLE/bn/literature-bnarchive.txt.gz --source bn=$SAMPLE/bn/poems-pd-banglakosh.txt.gz \
  --source en=$SAMPLE/en/wiki-en-chinapedia.txt.gz \
  --mix bn=0.7,en=0.3 --tokens 6e5 --max-epochs 4 --val-tokens 20000 --shard-tokens 200000 \
  --max-chars 400000 --out "$OUT/corpus" --overwrite --no-progress
# The build printed the shards' summary; inspect verifies them and recounts each language from the decoded text.
corpus inspect "$OUT/corpus" --recount --no-summary --no-progress
echo "Corpus report: $OUT/corpus/report.md (plot: $OUT/corpus/shares.png)"
