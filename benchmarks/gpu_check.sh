#!/usr/bin/env bash
# The one-shot GPU check (issue 11): one command, within 8 minutes of wall time on an H200 including
# compilation, at most 8 files in RESULTS_DIR, a short table printed last.
#
#   RESULTS_DIR=/path/to/results GIT_COMMIT=<sha> bash benchmarks/gpu_check.sh
#
# Runs with the machine's preinstalled python3 (PYTHON=... to choose another) from the checkout
# (PYTHONPATH=.); needs torch with CUDA and transformers, nothing else beyond the standard scientific stack
# (no `datasets`, no `datasketch`: the smoke's shards are made from data/sample). Each stage runs in its own
# process under its own time limit and writes its file as soon as it has measured, so a stage that fails or
# times out loses nothing measured before it. Stages (benchmarks/gpu_check.py says what each writes):
#   env, ours, hf eager, hf regional, smoke, then A/Bs while time remains, then the summary.
# Files: environment.json ours.json hf.json smoke.json ab.json summary.json stages.tsv log.txt.
# Exit code 0 when every stage that ran succeeded (stages skipped for lack of time do not count), else 1.
#
# The CPU dress rehearsal (tests/pretrain/test_gpu_check.py) runs this same script with GPU_CHECK_CONFIG=tiny
# GPU_CHECK_DEVICE=cpu. Knobs: GPU_CHECK_TOTAL_S (default 430: the stages' wall-time budget; the summary adds at most 30), the stage
# budgets below, GPU_CHECK_AB (the A/Bs, in order), and gpu_check.py's GPU_CHECK_* settings.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${RESULTS_DIR:?set RESULTS_DIR to the folder the results go to}"
mkdir -p "$RESULTS_DIR"
export RESULTS_DIR
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export GIT_COMMIT="${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
PYTHON=${PYTHON:-python3}
TOTAL_S=${GPU_CHECK_TOTAL_S:-430}
AB=${GPU_CHECK_AB:-"mb2x cudnn head128 hf_whole"}
# Stage budgets in seconds (each also capped by what is left of TOTAL_S): caps for a stage that hangs or
# compiles slowly, not expectations; a typical H200 run should leave about two minutes for the A/Bs
# (an estimate: this script has not run on a GPU yet).
ENV_S=${GPU_CHECK_ENV_S:-60}; OURS_S=${GPU_CHECK_OURS_S:-150}; HF_EAGER_S=${GPU_CHECK_HF_EAGER_S:-90}
HF_REGIONAL_S=${GPU_CHECK_HF_REGIONAL_S:-150}; SMOKE_S=${GPU_CHECK_SMOKE_S:-200}; AB_S=${GPU_CHECK_AB_S:-80}
MIN_STAGE_S=${GPU_CHECK_MIN_STAGE_S:-20}  # a stage with less time than this left is skipped

exec > >(tee -a "$RESULTS_DIR/log.txt") 2>&1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
export GPU_CHECK_WORK="$WORK"
trap 'rm -rf "$WORK"' EXIT
START=$(date +%s)
FAILED=0
printf 'stage\texit_code\tseconds\n' > "$RESULTS_DIR/stages.tsv"

stage() {  # stage BUDGET NAME [ARG]: run one stage under min(BUDGET, what is left), record its outcome
  local budget=$1; shift
  local left=$(( TOTAL_S - ($(date +%s) - START) ))
  (( budget > left )) && budget=$left
  if (( budget < MIN_STAGE_S )); then
    echo "== $* skipped: ${left}s of the ${TOTAL_S}s budget left"
    printf '%s\tskipped\t0\n' "$*" >> "$RESULTS_DIR/stages.tsv"
    return 0
  fi
  echo "== $* (up to ${budget}s)"
  local t0; t0=$(date +%s)
  timeout --kill-after=10 "$budget" "$PYTHON" benchmarks/gpu_check.py "$@"
  local rc=$?
  (( rc == 124 || rc == 137 )) && echo "!! $* timed out after ${budget}s"
  (( rc != 0 && rc != 124 && rc != 137 )) && echo "!! $* failed (exit $rc)"
  (( rc != 0 )) && FAILED=1
  printf '%s\t%s\t%s\n' "$*" "$rc" "$(( $(date +%s) - t0 ))" >> "$RESULTS_DIR/stages.tsv"
}

stage "$ENV_S" env
stage "$OURS_S" ours
stage "$HF_EAGER_S" hf eager
stage "$HF_REGIONAL_S" hf regional
stage "$SMOKE_S" smoke
for variant in $AB; do
  stage "$AB_S" ab "$variant"
done
# The summary always runs (its own 30 s after the budget) and prints the table last.
echo "== summary"
timeout --kill-after=5 30 "$PYTHON" benchmarks/gpu_check.py summary || FAILED=1
exit $FAILED
