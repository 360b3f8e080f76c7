#!/bin/bash
# usage: batch3.sh NAME...: a second repetition of the 1-task builds at 1x, 4x (--max-chars 2000000) and 16x (500000)
for name in "$@"; do
  for f in corpus/ingest.py corpus/quality/dedup.py corpus/engine/steps.py; do cp ${SCRATCH:-/tmp/cm}/$name/$f ${SCRATCH:-/tmp/cm}/code/$f; done
  for s in "1 2000000 1" "4 2000000 1" "16 500000 1"; do
    set -- $s
    echo "== $name k=$1 max-chars=$2 tasks=$3: $(${SCRATCH:-/tmp/cm}/run.sh ${SCRATCH:-/tmp/cm}/code $1 $2 $3 rep2-$name-k$1-m$2-t$3 2>&1 | tail -1)"
  done
done
