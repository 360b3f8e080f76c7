"""The corpus build against raw batched tokenization, tokenization's share inside the build, 2 tasks against 1,
and CPU per document and peak memory as the input grows.

    python benchmarks/bench_corpus.py [--data DIR] [--tokenizer gpt2] [--max-chars N] [--repeat 2]
                                      [--scales 1,4] [--two-tasks 1,4] [--out FIGURES.json]

Input: every ``.txt.gz`` under ``DIR/bn`` and ``DIR/en`` (default: ``../shared/data`` beside the checkout, else
the shipped ``data/sample``), the head of each file (``--max-chars`` characters). The input at scale k is the
same files listed k times under distinct names (hard links in a temporary folder), so the build reads k times
the documents; dedup then drops the copies, as it should, but every stage up to the signatures handles k times
the documents (the plan, packing and report see 1x).

Printed for each scale, each measured in this run:

* build over raw batched tokenization, per core: bytes per CPU second of a 1-task local build (``corpus
  build`` end to end in a subprocess, every process and thread counted) over bytes per CPU second of the
  tokenizer's batched ``encode_ids`` of the same documents, each batch encoded as it is read (only the encode
  calls timed), on one thread, in a fresh process;
  goal >= 0.8 at 1x, >= 0.9 at 4x. CPU seconds, because on a shared machine wall time depends on the other
  users; the fastest of ``--repeat`` runs, because CPU time too moves by 20% or more when the other users'
  work shares the cores' caches;
* tokenization's share of the build's CPU: the CPU seconds the build's tasks spent in the tokenizer (each
  task counts its own, ``time.thread_time`` around its encode calls) over the build's CPU seconds. Both come
  from the same run, so another user's load, which slows both alike, barely moves it: it is the per-core
  ratio a quiet machine would show, but for the difference between the build's documents (after cleaning)
  and the raw input's;
* 2 tasks over 1 task (wall time; goal >= 1.6 on 2 cores) at the ``--two-tasks`` scales: a task owns one
  core, so this is how well the work spreads over tasks; at 1x the fixed start-up (imports, one process per
  task) and the serial tail (plan, packing, report) weigh four times as much as at 4x;
* CPU microseconds per document and peak RSS of the whole build (the process and its task processes,
  ``ru_maxrss`` of the children), and each larger scale against the first: goals flat, RSS <= 1.2x.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _files(data: Path) -> list[tuple[str, Path]]:
    return [(lang, p) for lang in ("bn", "en") for p in sorted((data / lang).glob("*.txt.gz"))]


def raw_tokenization(tokenizer: str, files: list[tuple[str, Path]], max_chars: int, batch: int,
                     repeat: int) -> tuple[int, int, float]:
    """Documents and UTF-8 bytes of the input and CPU seconds to tokenize it in batches, on one thread (as a build task does:
    it owns one core); the fastest of ``repeat`` passes, in a fresh process (as each build runs in one: in this
    process, after the builds, the same passes measured up to 30% slower)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_raw_tokenization, tokenizer, files, max_chars, batch, repeat).result()


def _raw_tokenization(tokenizer: str, files: list[tuple[str, Path]], max_chars: int, batch: int,
                      repeat: int) -> tuple[int, int, float]:
    """Each pass reads the documents again and encodes each batch as soon as it is read, timing the encode calls
    alone: the tokenizer sees new strings, as the build's are (CPython keeps a string's UTF-8 form once made, so
    a second pass over the same objects would skip the conversion the first paid), and only a batch of them is
    held, as in the build. Holding every document of the input first made the tokenizer's time grow faster than
    the input (4x: 5.0-5.6x the CPU of 1x, against 4.0-4.2x for the build's own tokenizer time;
    benchmarks/results/2026-12-04-corpus-floor/README.md)."""
    from fertility.text import iter_documents, parse_text_arg
    from fertility.tokenizers import load_tokenizer, one_thread

    def batches() -> Iterator[list[str]]:
        texts: list[str] = []
        for lang, p in files:
            for doc in iter_documents(parse_text_arg(f"{lang}={p}"), max_chars=max_chars):
                texts.append(doc.text)
                if len(texts) == batch:
                    yield texts
                    texts = []
        if texts:
            yield texts

    tok = load_tokenizer(tokenizer)
    seconds = []
    with one_thread():
        for _ in range(repeat):
            n_docs = n_bytes = 0
            encoding = 0.0
            for texts in batches():
                start = time.process_time()
                tok.encode_ids(texts)
                encoding += time.process_time() - start
                n_docs, n_bytes = n_docs + len(texts), n_bytes + sum(len(t.encode()) for t in texts)
            seconds.append(encoding)
    return n_docs, n_bytes, min(seconds)


@dataclass
class Build:
    """One ``corpus build``: wall and CPU seconds (every process and thread), the CPU seconds its tasks spent in
    the tokenizer (their own count, ``counters/*.tokenize.json``) and the peak RSS (KiB, largest process)."""

    wall: float
    cpu: float
    tokenizer_cpu: float
    rss_kib: int

    @property
    def share(self) -> float:
        return self.tokenizer_cpu / self.cpu


def build_once(tokenizer: str, files: list[tuple[str, Path]], max_chars: int, tasks: int, tokens: str = "1e6",
               val_tokens: str = "2e4") -> Build:
    """One ``corpus build`` in a fresh subprocess, its work folder kept to read the tasks' tokenizer time
    (``tokens`` and ``val_tokens``: its plan's)."""
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        out, work = Path(tmp) / "out", Path(tmp) / "work"
        argv = [sys.executable, "-m", "corpus", "build", "--tokenizer", tokenizer, "--mix", "bn=0.7,en=0.3",
                "--tokens", tokens, "--val-tokens", val_tokens, "--max-chars", str(max_chars), "--out", str(out),
                "--work-dir", str(work), "--keep-work", "--workers", str(tasks), "--tasks", str(tasks),
                "--no-progress"]
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
        encoding = sum(json.loads(p.read_text())["tokenizer_cpu_seconds"]
                       for p in work.glob("t*/counters/*.tokenize.json"))
        return Build(seconds, float(cpu), encoding, int(rss))


def copies(files: list[tuple[str, Path]], k: int, folder: Path) -> list[tuple[str, Path]]:
    """``files`` listed ``k`` times under distinct names (hard links in ``folder``, else symbolic links)."""
    if k == 1:
        return files
    out = []
    folder = folder / f"x{k}"  # one folder per scale: the names repeat from one scale to the next
    folder.mkdir()
    for i in range(k):
        for lang, f in files:
            link = folder / f"{i}-{lang}-{f.name}"
            os.link(f, link) if os.stat(f).st_dev == os.stat(folder).st_dev else link.symlink_to(f)
            out.append((lang, link))
    return out


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}" if len(values) == 1 else f"{min(values):.2f}-{max(values):.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = ROOT.parent / "shared" / "data"
    p.add_argument("--data", type=Path, default=shared if shared.is_dir() else ROOT / "data" / "sample")
    p.add_argument("--tokenizer", default="gpt2")
    p.add_argument("--max-chars", type=int, default=2_000_000, help="per file")
    p.add_argument("--batch", type=int, default=500, help="documents per raw tokenization batch")
    p.add_argument("--repeat", type=int, default=2, help="runs of each measurement; the fastest counts")
    p.add_argument("--scales", default="1,4", help="input sizes, in copies of the input (e.g. 1,4,16)")
    p.add_argument("--two-tasks", default="1,4", help="the scales at which 2 tasks are measured against 1")
    p.add_argument("--out", type=Path, help="also write every run's figures here (JSON)")
    a = p.parse_args()
    scales = [int(x) for x in a.scales.split(",")]
    two_at = {int(x) for x in a.two_tasks.split(",") if x}
    files = _files(a.data)
    print(f"input: {len(files)} files of {a.data.name}, head {a.max_chars:,} chars each; tokenizer {a.tokenizer}; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; fastest of {a.repeat} runs each "
          f"(CPU and wall time separately)", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-corpus-copies-") as tmp:
        for k in scales:
            inputs = copies(files, k, Path(tmp))
            n_docs, n_bytes, raw_s = raw_tokenization(a.tokenizer, inputs, a.max_chars, a.batch, a.repeat)
            runs: dict[int, list[Build]] = {1: [], 2: []}
            for _ in range(a.repeat):  # alternately, so that a busy spell of the machine falls on both
                for tasks in (1, 2) if k in two_at else (1,):
                    runs[tasks].append(build_once(a.tokenizer, inputs, a.max_chars, tasks))
            one = runs[1]
            cpu, wall, rss = min(r.cpu for r in one), min(r.wall for r in one), max(r.rss_kib for r in one)
            shares = [r.share for r in one]
            print(f"{k}x: {n_docs:,} documents, {n_bytes:,} UTF-8 bytes")
            print(f"  raw batched tokenization: {raw_s:7.2f} CPU s  {n_bytes / raw_s / 1e6:6.2f} MB per CPU second")
            print(f"  corpus build, 1 task:     {wall:7.2f} s wall, {cpu:6.2f} CPU s  "
                  f"{n_bytes / cpu / 1e6:6.2f} MB per CPU s; {cpu / n_docs * 1e6:6.1f} CPU us per document; "
                  f"peak RSS {rss / 1024:.0f} MiB")
            print(f"  ratio build / raw tokenization per core (CPU s, 1 task): {raw_s / cpu:.2f}  "
                  f"(goal >= {0.8 if k == 1 else 0.9})")
            print(f"  tokenization's share of the build's CPU (the tasks' own count, 1 task): {_spread(shares)} "
                  f"over {len(shares)} runs  (the per-core ratio a quiet machine would show)")
            results[k] = {"documents": n_docs, "bytes": n_bytes, "raw_cpu_s": raw_s,
                          "runs": {t: [asdict(r) for r in rs] for t, rs in runs.items() if rs}}
            if runs[2]:
                two = min(r.wall for r in runs[2])
                print(f"  corpus build, 2 tasks:    {two:7.2f} s wall, {min(r.cpu for r in runs[2]):6.2f} CPU s; "
                      f"ratio 2 tasks / 1 task: {wall / two:.2f}  (goal >= 1.6 on 2 cores)")
            sys.stdout.flush()
    base = results[scales[0]]
    base_cpu = min(r["cpu"] for r in base["runs"][1]) / base["documents"]
    base_rss = max(r["rss_kib"] for r in base["runs"][1])
    for k in scales[1:]:
        r = results[k]
        per_doc = min(x["cpu"] for x in r["runs"][1]) / r["documents"]
        rss = max(x["rss_kib"] for x in r["runs"][1])
        print(f"{k}x against {scales[0]}x: CPU per document {per_doc / base_cpu:.2f}x, peak RSS {rss / base_rss:.2f}x "
              f"(goals: flat, RSS <= 1.2x)")
    if a.out:
        a.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "cores": os.cpu_count(),
                                     "scales": results}, indent=1))


if __name__ == "__main__":
    main()
