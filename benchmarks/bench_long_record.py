"""Peak memory on one long JSONL record against the same text as one plain-text line, and against the same
text as ordinary lines, per command.

    python benchmarks/bench_long_record.py [--mb 50] [--commands fertility,train,corpus] [--data DIR]

The input, written to a temporary folder: the Bangla text of ``DIR/bn/*.txt.gz`` (default ``../shared/data``
beside the checkout, else the shipped ``data/sample``) joined by spaces and repeated to ``--mb`` MB of UTF-8,
as one document, followed by the first ``--rest`` lines of that text as ordinary documents (a tokenizer's
training needs more than one document). The same documents are written twice: ``plain.txt`` (one line each)
and ``record.jsonl`` (one ``{"text": ...}`` record each, UTF-8 unescaped); and ``lines.txt`` holds the same
text with the long document cut at spaces into lines of about ``--line-chars`` characters (ordinary documents).

Each command runs as a subprocess on each file, and its peak resident memory is ``ru_maxrss`` from
``os.wait4`` (the process, or its largest descendant):

* ``fertility report --tokenizer gpt2``;
* ``tokenizers-train --vocab-size 1024 --sample-chars 2000000`` (hf-bpe, no phrase stage);
* ``corpus build --tokenizer gpt2 --workers 1``.

Printed: peak RSS in MB of each, the JSONL / plain ratio, and the long / lines ratio (the larger of plain and
JSONL over ``lines.txt``); goal <= 1.5 for each (reading text cuts a long record the way it cuts a long plain
line, so the record should cost about what the line does: the JSON parse alone holds the record once more
while it is read; and the pieces a long document is cut into should cost about what as many characters of
ordinary lines do).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL = 1.5


def _data_dir() -> Path:
    shared = ROOT.parent / "shared" / "data"
    return shared if (shared / "bn").is_dir() else ROOT / "data" / "sample"


def write_inputs(folder: Path, data: Path, mb: float, rest: int, line_chars: int) -> tuple[Path, Path, Path]:
    """``plain.txt`` and ``record.jsonl`` in ``folder``: the same long document and ``rest`` short ones; and
    ``lines.txt``: the long document's text cut at spaces into lines of about ``line_chars``, then the same
    short ones."""
    lines = []
    for path in sorted((data / "bn").glob("*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    if not lines:
        raise SystemExit(f"{data}/bn: no .txt.gz text")
    once = " ".join(lines)
    target = int(mb * 1_000_000)
    size = len(once.encode())
    long = " ".join([once] * (target // size + 1))
    long = long.encode()[:target].decode("utf-8", errors="ignore").strip()
    short = lines[:rest]
    plain, record = folder / "plain.txt", folder / "record.jsonl"
    with open(plain, "w", encoding="utf-8") as f:
        for text in [long, *short]:
            f.write(text + "\n")
    with open(record, "w", encoding="utf-8") as f:
        for text in [long, *short]:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    ordinary = folder / "lines.txt"
    with open(ordinary, "w", encoding="utf-8") as f:
        start = 0
        while start < len(long):
            cut = long.find(" ", start + line_chars)
            cut = len(long) if cut < 0 else cut
            f.write(long[start:cut].strip() + "\n")
            start = cut + 1
        for text in short:
            f.write(text + "\n")
    return plain, record, ordinary


def commands(path: Path, out: Path) -> dict[str, list[str]]:
    spec = f"bn={path}"
    return {
        "fertility": [str(BIN / "fertility"), "report", "--tokenizer", "gpt2", "--text", spec, "--out", str(out),
                      "--no-progress"],
        "train": [str(BIN / "tokenizers-train"), "--text", spec, "--vocab-size", "1024", "--sample-chars",
                  "2000000", "--phrase-fraction", "0", "--out", str(out), "--no-progress"],
        "corpus": [str(BIN / "corpus"), "build", "--source", spec, "--tokenizer", "gpt2", "--tokens", "1000000", "--mix", "bn=1",
                   "--workers", "1", "--out", str(out), "--no-progress"],
    }


def peak_rss(argv: list[str], log: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of ``argv`` run to its end; a failed run stops the benchmark."""
    start = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{log.read_text()[-3000:]}")
    return usage.ru_maxrss / 1024, time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=50, help="MB of UTF-8 in the long document (default 50)")
    p.add_argument("--rest", type=int, default=300, help="ordinary documents after it (default 300)")
    p.add_argument("--line-chars", type=int, default=1000,
                   help="characters per line of the long document's text in lines.txt (default 1000)")
    p.add_argument("--commands", default="fertility,train,corpus", help="which of fertility, train, corpus")
    p.add_argument("--data", type=Path, default=None, help="a folder with bn/*.txt.gz (default: the shared data)")
    args = p.parse_args()
    wanted = [c.strip() for c in args.commands.split(",") if c.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain, record, ordinary = write_inputs(folder, args.data or _data_dir(), args.mb, args.rest, args.line_chars)
        print(f"one document of {args.mb:g} MB of Bangla and {args.rest} short ones: plain.txt "
              f"{plain.stat().st_size / 1e6:.1f} MB, record.jsonl {record.stat().st_size / 1e6:.1f} MB; "
              f"lines.txt (~{args.line_chars} characters a line) {ordinary.stat().st_size / 1e6:.1f} MB")
        print(f"{'command':<10} {'plain MB':>9} {'jsonl MB':>9} {'lines MB':>9} {'jsonl/plain':>11} "
              f"{'long/lines':>10}  {'plain s':>7} {'jsonl s':>7} {'lines s':>7}  goal")
        worst = 0.0
        for name in wanted:
            rss, wall = {}, {}
            for kind, path in (("plain", plain), ("jsonl", record), ("lines", ordinary)):
                argv = commands(path, folder / f"out-{name}-{kind}")[name]
                rss[kind], wall[kind] = peak_rss(argv, folder / f"{name}-{kind}.log")
            ratio = rss["jsonl"] / rss["plain"]
            long_ratio = max(rss["plain"], rss["jsonl"]) / rss["lines"]
            worst = max(worst, ratio, long_ratio)
            ok = "ok" if max(ratio, long_ratio) <= GOAL else "MISSED"
            print(f"{name:<10} {rss['plain']:9.0f} {rss['jsonl']:9.0f} {rss['lines']:9.0f} {ratio:11.2f} "
                  f"{long_ratio:10.2f}  {wall['plain']:7.1f} {wall['jsonl']:7.1f} {wall['lines']:7.1f}  "
                  f"<= {GOAL} {ok}", flush=True)
        print(f"worst ratio {worst:.2f} (goal <= {GOAL})")


if __name__ == "__main__":
    main()
