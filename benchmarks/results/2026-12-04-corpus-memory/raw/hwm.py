"""Run `corpus build` in-process; the exact peak RSS (VmHWM, reset at every phase boundary via clear_refs) of each phase."""
import contextlib
import functools
import importlib
import os
import sys

sys.path.insert(0, os.getcwd())
stack = ["start"]
peaks: dict[str, int] = {}


def hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024


def boundary(new_stack_top=None, pop=False):
    p = stack[-1]
    peaks[p] = max(peaks.get(p, 0), hwm())
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    if pop:
        stack.pop()
    if new_stack_top:
        stack.append(new_stack_top)


def wrap(mod, name, label=None):
    m = importlib.import_module(mod)
    if not hasattr(m, name):
        return
    f = getattr(m, name)

    @functools.wraps(f)
    def g(*a, **k):
        boundary(label or name)
        try:
            return f(*a, **k)
        finally:
            boundary(pop=True)
    setattr(m, name, g)


import corpus.ingest as ci  # noqa: E402

orig_run = ci.run_pipeline


def run_pipeline(executor, steps, n, logs):
    boundary("stage:" + logs.rsplit("/", 1)[-1])
    try:
        return orig_run(executor, steps, n, logs)
    finally:
        boundary(pop=True)


ci.run_pipeline = run_pipeline
for mod, name in [("corpus.ingest", "_reduce"), ("corpus.ingest", "_pairs"), ("corpus.ingest", "near_duplicates"),
                  ("corpus.ingest", "exact_duplicates"), ("corpus.ingest", "_kept_columns"),
                  ("corpus.engine.steps", "sorted_records"), ("corpus.engine.steps", "sorted_order"),
                  ("corpus.engine.steps", "_npz_bytes")]:
    wrap(mod, name)
for name in ["prepare", "lay_out", "write_layout", "check_written", "save_keys", "write_report"]:
    wrap("corpus.build", name)
from corpus.cli import main  # noqa: E402

with contextlib.suppress(SystemExit):  # the CLI exits with the build's status; the phases are printed after
    main(sys.argv[1:])
boundary()
print("PHASE PEAKS (MiB, VmHWM):", file=sys.stderr)
for p, v in peaks.items():
    print(f"  {p:24s} {v}", file=sys.stderr)
