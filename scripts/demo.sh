#!/usr/bin/env bash
# The whole pipeline on the data the repository ships. Run it through `make demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${DEMO_OUT:-demo_out}
SAMPLE=data/sample
mkdir -p "$OUT"

echo "== 1. Fertility: how do GPT-2 and o200k treat Bangla and English? =="
fertility report --tokenizer gpt2 --tokenizer o200k_base \
  --text bn=$SAMPLE/bn/literature-bnarchive.txt.gz --text bn=$SAMPLE/bn/poems-pd-banglakosh.txt.gz \
  --text en=$SAMPLE/en/wiki-en-chinapedia.txt.gz \
  --parallel bn=$SAMPLE/parallel/ben_Beng.txt.gz --parallel en=$SAMPLE/parallel/eng_Latn.txt.gz --reference en \
  --max-chars 400000 --out "$OUT/fertility"
echo "HTML report: $OUT/fertility/report.html"
