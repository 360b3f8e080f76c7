#!/usr/bin/env bash
set -euo pipefail
echo "== 2. Train: a script-aware tokenizer beside GPT-2's recipe on the same Bangla + English sample =="
tokenizers-train --text bn=$SAMPLE/bn/literature-bnarchive.txt.gz --text bn=$SAMPLE/bn/poems-pd-banglakosh.txt.gz \
  --text en=$SAMPLE/en/wiki-en-chinapedia.txt.gz --vocab-size 8000 --max-chars-per-source 600000 --shares bn=0.65,en=0.35 \
  --naive --reference gpt2 --no-progress --out "$OUT/bn-en-bpe" --overwrite
# later steps (corpus) read the trained tokenizer's path from here
echo "$OUT/bn-en-bpe/tokenizer.json" > "$OUT/tokenizer_path"
