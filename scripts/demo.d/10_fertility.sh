#!/usr/bin/env bash
set -euo pipefail
echo "== 1. Fertility: how do GPT-2 and o200k treat Bangla and English? =="
fertility report --tokenizer gpt2 --tokenizer o200k_base \
  --text bn=$SAMPLE/bn/literature-bnarchive.txt.gz --text bn=$SAMPLE/bn/poems-pd-banglakosh.txt.gz \
  --text en=$SAMPLE/en/wiki-en-chinapedia.txt.gz \
  --parallel bn=$SAMPLE/parallel/ben_Beng.txt.gz --parallel en=$SAMPLE/parallel/eng_Latn.txt.gz --reference en \
  --max-chars 400000 --out "$OUT/fertility" --overwrite
