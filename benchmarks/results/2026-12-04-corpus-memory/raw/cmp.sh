#!/bin/bash
# usage: cmp.sh A B: cmp every output file of variant A with variant B's, at every scale and task count built
cd ${SCRATCH:-/tmp/cm}/out
for d in $1-*; do
  other=$2-${d#$1-}
  n=0; bad=0
  for f in $(cd $d && find . -type f | sort); do n=$((n+1)); cmp $d/$f $other/$f || bad=$((bad+1)); done
  [ "$(cd $d && find . -type f | sort)" == "$(cd $other && find . -type f | sort)" ] || { echo "file lists differ"; bad=$((bad+1)); }
  echo "$d vs $other: $n files, $bad differ"
done
