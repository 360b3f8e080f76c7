"""The sentencepiece alignment's events (characters not their own replacement, spaces dropped) found with
``np.union1d`` / ``np.isin`` as at commit c4f02c5, against masks over the characters as now: the arguments
captured from the old ``Alignment.spans`` on the benchmark's text, process CPU ms for all five batches, best
of 9.

    python benchmarks/results/2026-12-03-fertility-exact-2/events.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]
import micro  # noqa: E402
from bench_fertility import FILES, SHARED, batches  # noqa: E402

from fertility.analysis import head_documents  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402
from fertility.tokenizers.base import flatten  # noqa: E402

captured: list[tuple[np.ndarray, np.ndarray]] = []


class CapturingNumpy:
    """numpy for the old module, keeping union1d's arguments."""

    def __getattr__(self, name):
        return getattr(np, name)

    def union1d(self, a, b):
        captured.append((a, b))
        return np.union1d(a, b)


def main() -> None:
    tok = load_tokenizer("bnlp-bn-spm", SHARED)
    module = micro.old_alignment_module()
    old = module.Alignment(tok._sp, Path(tok.path).read_bytes())
    module.np = CapturingNumpy()
    for lang, paths in FILES.items():
        docs = head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000)
        bs = batches(docs)
        encoded = [flatten(tok._sp.encode(b)) for b in bs]
        for b, (ids, counts) in zip(bs, encoded, strict=True):  # fills the tables (their own union1d calls)
            old.spans(b, ids, counts)
        captured.clear()
        sizes = []
        for b, (ids, counts) in zip(bs, encoded, strict=True):
            before = len(captured)
            old.spans(b, ids, counts)
            sizes += [sum(map(len, b))] * (len(captured) - before)
        work = list(zip(captured, sizes, strict=True))

        def sorts(work=work):
            for (changed, dropped), _ in work:
                events = np.union1d(changed, dropped)
                np.isin(events, dropped, assume_unique=True)

        def masks(work=work):
            for (changed, dropped), n in work:
                is_event = np.zeros(n, dtype=bool)  # stands for (flags & _CHANGED) != 0, a pass both make
                is_event[changed] = True
                is_event[dropped] = True
                events = np.flatnonzero(is_event)
                gone = np.zeros(n, dtype=bool)
                gone[dropped] = True
                gone[events]

        best: dict[str, float] = {}
        for _ in range(9):
            for name, fn in (("union1d+isin", sorts), ("masks", masks)):
                start = time.process_time()
                fn()
                best[name] = min(best.get(name, float("inf")), time.process_time() - start)
        print(lang, f"batches with dropped spaces: {len(work)},",
              {k: round(v * 1000, 2) for k, v in best.items()}, "ms")


if __name__ == "__main__":
    main()
