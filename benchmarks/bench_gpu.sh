#!/usr/bin/env bash
# The GPU benchmark of issue 6, as one prepared script: our `bangla-0.4b` training step against the same step
# of transformers' LlamaForCausalLM (same shape, weights, batch, optimizer; both bf16 + torch.compile + SDPA +
# fused AdamW), tokens/s, MFU, peak memory and their ratio, plus a gradient-flow arbiter pass.
#
#   bash benchmarks/bench_gpu.sh                      # micro-batches 16 then 32, default compile mode
#   MICRO_BATCHES="16" COMPILE_MODE=max-autotune-no-cudagraphs bash benchmarks/bench_gpu.sh
#
# Needs a CUDA build of torch plus this project's dependencies in $PYTHON (default: .venv/bin/python, else
# python3). Raw output (JSON + the printed table + nvidia-smi and versions) goes to
# benchmarks/results/gpu_<GPU>_<UTC date>/; commit that folder and quote it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
MICRO_BATCHES=${MICRO_BATCHES:-"16 32"}
COMPILE_MODE=${COMPILE_MODE:-default}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
PER_RUN_TIMEOUT=${PER_RUN_TIMEOUT:-280}

"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device visible to torch ' + torch.__version__)"
gpu=$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name(0))" | tr -c 'A-Za-z0-9.\n-' '_')
out=benchmarks/results/gpu_${gpu}_$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  "$PYTHON" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__); print('gpu', torch.cuda.get_device_name(0))"
  nvidia-smi || true
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt"

status=0
for mb in $MICRO_BATCHES; do
  name="bangla-0.4b_mb${mb}_${COMPILE_MODE}"
  echo "== $name"
  if ! timeout "$PER_RUN_TIMEOUT" "$PYTHON" -m pretrain bench --config bangla-0.4b --micro-batch "$mb" \
      --steps "$STEPS" --warmup "$WARMUP" --compile-mode "$COMPILE_MODE" --out "$out/$name.json" \
      > >(tee "$out/$name.txt") 2> >(tee "$out/$name.stderr.txt" >&2); then
    echo "!! $name failed or timed out (see $out/$name.stderr.txt)"
    status=1
  fi
done
echo "raw output in $out"
exit $status
