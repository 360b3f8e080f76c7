#!/usr/bin/env bash
# The one-shot GPU check (issues 11, 21): one command that fits a first call to a GPU machine lent for 15
# minutes in all (cold start and idle time included) and still leaves room for a rerun: every stage ends
# within GPU_CHECK_TOTAL_S (default 300 s), the summary within 20 s more; at most 8 files in RESULTS_DIR;
# a short table printed last.
#
#   bash benchmarks/gpu_check.sh            # RESULTS_DIR defaults to $OUT (the device tool's folder)
#   RESULTS_DIR=/path/to/results GIT_COMMIT=<sha> bash benchmarks/gpu_check.sh
#   bash benchmarks/gpu_check.sh --plan     # print the worst-case schedule (every stage hanging to its
#                                           # limit), run nothing, write nothing
#
# Runs with the machine's preinstalled python3 (PYTHON=... to choose another) from the checkout
# (PYTHONPATH=.); needs torch with CUDA and transformers, nothing else beyond the standard scientific stack
# (no datatrove, datasets, datasketch, ray or lm_eval: the smoke's shards are made from data/sample). Each
# stage runs in its own process under its own time limit, with its own inductor cache (an FX/AOTAutograd
# graph cached by one stage is never reused by another: torch 2.11's cache key leaves out the SDPA backend,
# so a forced-backend A/B could silently run the default run's kernel), and writes its file as soon as it
# has measured, so a stage that fails or times out loses nothing measured before it.
#
# Stages (benchmarks/gpu_check.py says what each writes), in order of priority:
#   essentials: env, ours, hf eager, hf regional, ab mb2x (micro-batch 32: the "fits 80 GB" figure)
#   then, only while time is left: smoke, the other A/Bs (GPU_CHECK_AB: muon, i.e. Muon against AdamW, first),
#   then the summary.
# If `ours` writes nothing (compilation hung or crashed the process), `ours eager` measures our step
# uncompiled so the ratio still comes back; a compile error inside the stage falls back the same way.
# Files: environment.json ours.json hf.json smoke.json ab.json summary.json stages.tsv log.txt.
# Exit code 0 when every stage that ran succeeded (stages skipped for lack of time do not count), else 1.
#
# The CPU dress rehearsal (tests/pretrain/test_gpu_check.py) runs this same script with GPU_CHECK_CONFIG=tiny
# GPU_CHECK_DEVICE=cpu. Knobs: GPU_CHECK_TOTAL_S, the stage limits below, GPU_CHECK_AB (the optional A/Bs,
# in order), and gpu_check.py's GPU_CHECK_* settings.
set -uo pipefail
cd "$(dirname "$0")/.."
PLAN_ONLY=0
[[ "${1:-}" == "--plan" ]] && PLAN_ONLY=1
TOTAL_S=${GPU_CHECK_TOTAL_S:-300}
AB=${GPU_CHECK_AB:-"muon cudnn head128"}
# Stage limits in seconds (each also capped by what is left of TOTAL_S): caps for a stage that hangs or
# compiles slowly, not expectations. In the worst case (every stage hanging to its limit) the essentials
# still all run: micro-batch 32 gets 80 s for its cold compile, 40 s if `ours` also had to fall back to
# eager (`--plan` prints the schedule). Estimates for an H200, not yet measured there.
ENV_S=${GPU_CHECK_ENV_S:-20}; OURS_S=${GPU_CHECK_OURS_S:-80}; OURS_EAGER_S=${GPU_CHECK_OURS_EAGER_S:-30}
HF_EAGER_S=${GPU_CHECK_HF_EAGER_S:-35}; HF_REGIONAL_S=${GPU_CHECK_HF_REGIONAL_S:-65}
MB2X_S=${GPU_CHECK_MB2X_S:-90}; SMOKE_S=${GPU_CHECK_SMOKE_S:-120}; AB_S=${GPU_CHECK_AB_S:-60}
MIN_STAGE_S=${GPU_CHECK_MIN_STAGE_S:-20}  # a stage with less time than this left is skipped
KILL_S=5      # a stage that ignores SIGTERM is killed this long after its limit
SUMMARY_S=20  # the summary's own limit, after TOTAL_S

if (( PLAN_ONLY )); then
  printf 'stage\tlimit_s\tstarts_by_s\tinductor_cache\n'
else
  RESULTS_DIR=${RESULTS_DIR:-${OUT:-}}
  : "${RESULTS_DIR:?set RESULTS_DIR (or OUT) to the folder the results go to}"
  mkdir -p "$RESULTS_DIR"
  export RESULTS_DIR
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONUNBUFFERED=1
  export GIT_COMMIT="${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  PYTHON=${PYTHON:-python3}
  exec > >(tee -a "$RESULTS_DIR/log.txt") 2>&1
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
  export GPU_CHECK_WORK="$WORK"
  trap 'rm -rf "$WORK"' EXIT
  printf 'stage\texit_code\tseconds\tlimit_s\n' > "$RESULTS_DIR/stages.tsv"
fi
START=$(date +%s)
PLANNED=0  # --plan: the worst-case clock, every stage taking its limit plus KILL_S
FAILED=0

elapsed() {
  if (( PLAN_ONLY )); then echo "$PLANNED"; else echo $(( $(date +%s) - START )); fi
}

stage() {  # stage LIMIT NAME [ARG]: run one stage under min(LIMIT, what is left), record its outcome
  local limit=$1; shift
  local name="$*" now; now=$(elapsed)
  local left=$(( TOTAL_S - now - KILL_S )) cache="${WORK:-WORK}/inductor/${name// /_}"
  (( limit > left )) && limit=$left
  if (( limit < MIN_STAGE_S )); then
    if (( PLAN_ONLY )); then printf '%s\tskipped\t%s\t-\n' "$name" "$now"; return 0; fi
    echo "== $name skipped: $(( TOTAL_S - now ))s of the ${TOTAL_S}s budget left"
    printf '%s\tskipped\t0\t0\n' "$name" >> "$RESULTS_DIR/stages.tsv"
    return 0
  fi
  if (( PLAN_ONLY )); then
    printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$now" "$cache"
    PLANNED=$(( now + limit + KILL_S ))
    return 0
  fi
  echo "== $name (up to ${limit}s)"
  local t0; t0=$(date +%s)
  mkdir -p "$cache"
  TORCHINDUCTOR_CACHE_DIR="$cache" timeout --kill-after="$KILL_S" "$limit" "$PYTHON" benchmarks/gpu_check.py "$@"
  local rc=$?
  (( rc == 124 || rc == 137 )) && echo "!! $name timed out after ${limit}s"
  (( rc != 0 && rc != 124 && rc != 137 )) && echo "!! $name failed (exit $rc)"
  (( rc != 0 )) && FAILED=1
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$limit" >> "$RESULTS_DIR/stages.tsv"
}

stage "$ENV_S" env
stage "$OURS_S" ours
if (( PLAN_ONLY )) || [[ ! -e "$RESULTS_DIR/ours.json" ]]; then
  stage "$OURS_EAGER_S" ours eager  # compilation wrote nothing: our step uncompiled, marked as a fallback
fi
stage "$HF_EAGER_S" hf eager
stage "$HF_REGIONAL_S" hf regional
stage "$MB2X_S" ab mb2x
stage "$SMOKE_S" smoke
for variant in $AB; do
  stage "$AB_S" ab "$variant"
done
if (( PLAN_ONLY )); then
  printf 'summary\t%s\t%s\t-\n' "$SUMMARY_S" "$(elapsed)"
  echo "# worst case: stages end by $(elapsed)s, the summary by $(( $(elapsed) + SUMMARY_S + KILL_S ))s"
  exit 0
fi
# A stage killed mid-write leaves its temp file (.NAME.XXXX.tmp); the folder holds the 8 files and no more.
find "$RESULTS_DIR" -maxdepth 1 -name '.*.tmp' -type f -delete
# The summary always runs (its own limit after the budget) and prints the table last.
echo "== summary"
timeout --kill-after="$KILL_S" "$SUMMARY_S" "$PYTHON" benchmarks/gpu_check.py summary || FAILED=1
exit $FAILED
