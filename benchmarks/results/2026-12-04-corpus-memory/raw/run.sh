#!/bin/bash
# usage: run.sh CODE_DIR K MAXCHARS TASKS TAG [extra args]
code=$1; k=$2; mc=$3; tasks=$4; tag=$5; shift 5
links=${SCRATCH:-/tmp/cm}/links/x$k
if [ ! -d $links ]; then
  mkdir -p $links
  for i in $(seq 1 $k); do for lang in bn en; do for f in ../shared/data/$lang/*.txt.gz; do ln $f $links/$i-$lang-$(basename $f); done; done; done
fi
args=()
for i in $(seq 1 $k); do for lang in bn en; do for f in ../shared/data/$lang/*.txt.gz; do args+=(--source $lang=$links/$i-$lang-$(basename $f)); done; done; done
out=${SCRATCH:-/tmp/cm}/out/$tag; work=${SCRATCH:-/tmp/cm}/work/$tag
rm -rf $out $work
cd $code
nice -n 10 /usr/bin/time -f "%M KiB %e s %U user" .venv/bin/python -m corpus build --tokenizer gpt2 --mix bn=0.7,en=0.3 --tokens 1e6 --val-tokens 2e4 --max-chars $mc --out $out --work-dir $work --workers $tasks --tasks $tasks --no-progress "${args[@]}" "$@"
