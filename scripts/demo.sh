#!/usr/bin/env bash
# The whole pipeline on the data the repository ships. Run it through `make demo`.
# Each step is a file in scripts/demo.d, run in name order with OUT and SAMPLE set.
set -euo pipefail
cd "$(dirname "$0")/.."
export OUT=${DEMO_OUT:-demo_out}
export SAMPLE=data/sample
mkdir -p "$OUT"
for step in scripts/demo.d/*.sh; do
  bash "$step"
done
