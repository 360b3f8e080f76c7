"""The corpus build against raw batched tokenization, 2 tasks against 1, and peak memory at 1x and 4x input.

    python benchmarks/bench_corpus.py [--data DIR] [--tokenizer gpt2] [--max-chars N] [--repeat 2] [--skip-4x]

Input: every ``.txt.gz`` under ``DIR/bn`` and ``DIR/en`` (default: ``../shared/data`` beside the checkout, else
the shipped ``data/sample``), the head of each file (``--max-chars`` characters). The 4x input is the same
files listed four times under distinct names (hard links in a temporary folder), so the build reads four
times the documents; dedup then drops the copies, as it should, but every stage handles 4x the documents.

Printed, each measured in this run:

* build over raw batched tokenization, per core: bytes per CPU second of a 1-task local build (``corpus
  build`` end to end in a subprocess, every process and thread counted) over bytes per CPU second of the
  tokenizer's batched ``encode_ids`` of the same documents in memory, on one thread; goal >= 0.8. CPU
  seconds, because on a shared machine wall time depends on the other users; the fastest of ``--repeat``
  runs, because CPU time too moves by 20% or more when the other users' work shares the cores' caches;
* 2 tasks over 1 task (wall time; goal >= 1.6 on 2 cores), at 1x and at 4x input: a task owns one core, so
  this is how well the work spreads over tasks; at 1x the fixed start-up (imports, one process per task) and
  the serial tail (plan, packing, report) weigh four times as much as at 4x;
* peak RSS of the whole build (the process and its task processes, ``ru_maxrss`` of the children) at 1x and
  at 4x input; goal: ratio <= 1.2;
* the per-core ratio again at 4x input (raw tokenization of the 4x documents against the 4x build), where
  the build's fixed costs (start-up, imports, tokenizer load, report) weigh a quarter as much. Every stage up
  to the signatures handles all 4x documents; dedup then keeps one copy, so the plan, packing and report see
  1x.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _files(data: Path) -> list[tuple[str, Path]]:
    return [(lang, p) for lang in ("bn", "en") for p in sorted((data / lang).glob("*.txt.gz"))]


def raw_tokenization(tokenizer: str, files: list[tuple[str, Path]], max_chars: int, batch: int,
                     repeat: int) -> tuple[int, float]:
    """UTF-8 bytes of the input and CPU seconds to tokenize it in batches, on one thread (as a build task does:
    it owns one core); the fastest of ``repeat`` passes, in a fresh process (as each build runs in one: in this
    process, after the builds, the same passes measured up to 30% slower)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_raw_tokenization, tokenizer, files, max_chars, batch, repeat).result()


def _raw_tokenization(tokenizer: str, files: list[tuple[str, Path]], max_chars: int, batch: int,
                      repeat: int) -> tuple[int, float]:
    from fertility.text import iter_documents, parse_text_arg
    from fertility.tokenizers import load_tokenizer, one_thread

    tok = load_tokenizer(tokenizer)
    texts = [d.text for lang, p in files for d in iter_documents(parse_text_arg(f"{lang}={p}"), max_chars=max_chars)]
    seconds = []
    with one_thread():
        for _ in range(repeat):
            # New string objects each pass, as the build's are: CPython keeps a string's UTF-8 form once made,
            # so a second pass over the same objects skips the conversion the tokenizer's first pass paid.
            fresh = [t.encode("utf-8").decode("utf-8") for t in texts]
            start = time.process_time()
            for i in range(0, len(fresh), batch):
                tok.encode_ids(fresh[i:i + batch])
            seconds.append(time.process_time() - start)
    return sum(len(t.encode()) for t in texts), min(seconds)


def build_once(tokenizer: str, files: list[tuple[str, Path]], max_chars: int,
               tasks: int) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (all its processes and threads) and peak RSS (KiB, largest process) of one
    ``corpus build`` in a fresh subprocess."""
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as out:
        argv = [sys.executable, "-m", "corpus", "build", "--tokenizer", tokenizer, "--mix", "bn=0.7,en=0.3",
                "--tokens", "1e6", "--val-tokens", "2e4", "--max-chars", str(max_chars), "--out", out,
                "--workers", str(tasks), "--tasks", str(tasks), "--no-progress"]
        for lang, p in files:
            argv += ["--source", f"{lang}={p}"]
        runner = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
                  "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
                  "print(u.ru_utime + u.ru_stime, u.ru_maxrss); sys.exit(r.returncode)")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", runner, *argv], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"build failed:\n{proc.stderr[-3000:]}")
        cpu, rss = proc.stdout.split()[-2:]
        return seconds, float(cpu), int(rss)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = ROOT.parent / "shared" / "data"
    p.add_argument("--data", type=Path, default=shared if shared.is_dir() else ROOT / "data" / "sample")
    p.add_argument("--tokenizer", default="gpt2")
    p.add_argument("--max-chars", type=int, default=2_000_000, help="per file")
    p.add_argument("--batch", type=int, default=500, help="documents per raw tokenization batch")
    p.add_argument("--repeat", type=int, default=2, help="runs of each measurement; the fastest counts")
    p.add_argument("--skip-4x", action="store_true")
    a = p.parse_args()
    files = _files(a.data)
    n_bytes, raw_s = raw_tokenization(a.tokenizer, files, a.max_chars, a.batch, a.repeat)
    runs = {1: [], 2: []}
    for _ in range(a.repeat):  # alternately, so that a busy spell of the machine falls on both
        for tasks in (1, 2):
            runs[tasks].append(build_once(a.tokenizer, files, a.max_chars, tasks))
    (one_s, one_cpu), (two_s, two_cpu) = ((min(r[0] for r in runs[t]), min(r[1] for r in runs[t])) for t in (1, 2))
    one_rss = max(r[2] for r in runs[1])
    print(f"input: {len(files)} files of {a.data.name}, head {a.max_chars:,} chars each: {n_bytes:,} UTF-8 bytes; "
          f"tokenizer {a.tokenizer}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    print(f"fastest of {a.repeat} runs each (CPU and wall time separately)")
    print(f"raw batched tokenization: {raw_s:7.2f} CPU s  {n_bytes / raw_s / 1e6:6.2f} MB per CPU second")
    print(f"corpus build, 1 task:     {one_s:7.2f} s wall, {one_cpu:6.2f} CPU s  {n_bytes / one_cpu / 1e6:6.2f} MB per CPU s")
    print(f"corpus build, 2 tasks:    {two_s:7.2f} s wall, {two_cpu:6.2f} CPU s  {n_bytes / two_cpu / 1e6:6.2f} MB per CPU s")
    print(f"ratio build / raw tokenization per core (CPU s, 1 task): {raw_s / one_cpu:.2f}  (goal >= 0.8)")
    print(f"ratio 2 tasks / 1 task at 1x: {one_s / two_s:.2f}  (goal >= 1.6 on 2 cores)")
    print(f"peak RSS at 1x: {one_rss / 1024:.0f} MiB")
    if not a.skip_4x:
        with tempfile.TemporaryDirectory(prefix="bench-corpus-4x-") as tmp:
            copies = []
            for k in range(4):
                for lang, f in files:
                    link = Path(tmp) / f"{k}-{lang}-{f.name}"
                    os.link(f, link) if os.stat(f).st_dev == os.stat(tmp).st_dev else link.symlink_to(f)
                    copies.append((lang, link))
            four = {1: [], 2: []}
            for _ in range(a.repeat):
                for tasks in (1, 2):
                    four[tasks].append(build_once(a.tokenizer, copies, a.max_chars, tasks))
            four_s, four_cpu = min(r[0] for r in four[1]), min(r[1] for r in four[1])
            four_two_s, four_rss = min(r[0] for r in four[2]), max(r[2] for r in four[1])
            four_bytes, four_raw_s = raw_tokenization(a.tokenizer, copies, a.max_chars, a.batch, a.repeat)
        print(f"raw batched tokenization at 4x: {four_raw_s:7.2f} CPU s;  corpus build at 4x, 1 task: {four_s:7.2f} s "
              f"wall, {four_cpu:6.2f} CPU s  {four_bytes / four_cpu / 1e6:6.2f} MB per CPU s")
        print(f"ratio build / raw tokenization per core at 4x (CPU s, 1 task): {four_raw_s / four_cpu:.2f}  "
              f"(goal >= 0.8; fixed costs amortised over 4x the documents)")
        print(f"corpus build at 4x, 2 tasks: {four_two_s:7.2f} s wall; ratio 2 tasks / 1 task at 4x: "
              f"{four_s / four_two_s:.2f}  (goal >= 1.6 on 2 cores)")
        print(f"peak RSS at 4x: {four_rss / 1024:.0f} MiB; ratio 4x/1x {four_rss / one_rss:.2f}  (goal <= 1.2)")

if __name__ == "__main__":
    main()
