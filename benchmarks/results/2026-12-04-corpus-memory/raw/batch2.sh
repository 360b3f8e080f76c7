#!/bin/bash
# usage: batch2.sh NAME...: for each variant, its ingest.py, dedup.py, steps.py copied into the one code folder
# ${SCRATCH:-/tmp/cm}/code (so the tokenizer path in the outputs is the same), then every scale built.
for name in "$@"; do
  for f in corpus/ingest.py corpus/quality/dedup.py corpus/engine/steps.py; do cp ${SCRATCH:-/tmp/cm}/$name/$f ${SCRATCH:-/tmp/cm}/code/$f; done
  for s in "1 2000000 1" "4 2000000 1" "16 500000 1" "1 500000 1" "4 500000 1" "1 2000000 2" "4 2000000 2"; do
    set -- $s
    echo "== $name k=$1 max-chars=$2 tasks=$3: $(${SCRATCH:-/tmp/cm}/run.sh ${SCRATCH:-/tmp/cm}/code $1 $2 $3 $name-k$1-m$2-t$3 2>&1 | tail -1)"
  done
done
