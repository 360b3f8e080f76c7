"""The rewrites of this change, old formulation against new, process CPU ms summed over the benchmark's batches
of 1 M characters (best of 30), each asserted equal first.

    python benchmarks/results/2026-12-04-fertility-spm-2/micro.py [--tokenizer-dir DIR]

* fill: ``scripts._fill_from_neighbours`` (every run's neighbours on both sides / the entry before each run,
  the one after it for the runs that start a document)
* text bytes: each document's UTF-8 length (encoded again per text / the layout's byte offsets differenced)
* take: a per-character array at the int32 characters ``byte_char`` gives the tokens (indexing / take)
* token script: ``count_tokens``' first characters and scripts (looked up at the starts moved for the empty
  tokens, and at the starts again / at the starts, the empty ones' scripts again)
* separators: ``Batch.words_are_whitespace_pieces`` (a difference array of every code point / its minimum
  first)
* spm alignment: ``Alignment.spans`` of commit 0c62f28 against the checkout's, on the texts ``encode_spans``
  hands it (those its lengths do not tile)
* spm alignment in situ: ``fertility.analyze(detail_every=1)`` with the one alignment and the other, taking
  turns (20 analyses): the best 3 of each, CPU ms and the analysis' minor page faults
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ of the checkout it lies in
from bench_fertility import FILES, SHARED, batches  # noqa: E402

import fertility.scripts as scripts  # noqa: E402
from fertility.analysis import analyze, head_documents  # noqa: E402
from fertility.graphemes import cluster_starts  # noqa: E402
from fertility.scoring.metrics import prepare_batch  # noqa: E402
from fertility.scripts import COMMON, INHERITED, codepoints  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402
from fertility.tokenizers.base import SEPARATORS_IN_PIECES  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
BEFORE = "0c62f28"  # the commit this change starts from


def best(fn, rounds: int = 30) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return 1e3 * min(times)


def compare(name: str, lang: str, old, new, items) -> None:
    for item in items:
        a, b = old(*item), new(*item)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)) if isinstance(a, tuple) \
            else np.array_equal(a, b), name
    print(f"{name:<20} {lang:<3} old {best(lambda: [old(*i) for i in items]):7.2f}   "
          f"new {best(lambda: [new(*i) for i in items]):7.2f}")


def fill_both_sides(script, doc_first, doc_last):
    n = script.size
    fill = np.flatnonzero((script == COMMON) | (script == INHERITED))
    out = script.copy()
    if not fill.size:
        return out
    first = np.zeros(n, dtype=bool)
    first[doc_first] = True
    last = np.zeros(n, dtype=bool)
    last[doc_last] = True
    new_run = np.ones(fill.size, dtype=bool)
    new_run[1:] = (fill[1:] != fill[:-1] + 1) | first[fill[1:]]
    run_first = np.flatnonzero(new_run)
    starts = fill[run_first]
    ends = fill[np.append(run_first[1:], fill.size) - 1]
    run_script = np.where(~first[starts], script[(starts - 1).clip(0)],
                          np.where(~last[ends], script[(ends + 1).clip(max=n - 1)], COMMON))
    out[fill] = np.repeat(run_script, np.diff(np.append(run_first, fill.size)))
    return out


def fill_args(texts):
    """``_fill_from_neighbours``' arguments as ``scripted_batch`` makes them."""
    cps = codepoints("".join(texts))
    doc_char_start = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=doc_char_start[1:])
    cluster_start = np.flatnonzero(cluster_starts(cps, doc_char_start))
    base = scripts._lookup(scripts._script_table, cps[cluster_start])
    first = np.searchsorted(cluster_start, doc_char_start)
    nonempty = first[1:] > first[:-1]
    return base, first[:-1][nonempty], first[1:][nonempty] - 1


def token_script_old(batch, gs, ge, counts):
    sb, n_bytes = batch.scripted, int(batch.scripted.char_to_byte[-1])
    at = gs
    empty = np.flatnonzero(ge <= gs)
    if empty.size:
        doc = np.searchsorted(np.cumsum(counts), empty, "right")
        at = gs.copy()
        at[empty] = np.minimum(gs[empty], sb.doc_byte_start[doc + 1] - 1).clip(0, n_bytes - 1)
    first_char = batch.chars(at)
    script = sb.char_script[first_char]
    if empty.size:
        first_char = batch.chars(gs)
    return first_char, script


def token_script_new(batch, gs, ge, counts):
    sb, n_bytes = batch.scripted, int(batch.scripted.char_to_byte[-1])
    first_char = batch.chars(gs)
    script = sb.char_script.take(first_char, mode="clip")
    empty = np.flatnonzero(ge <= gs)
    if empty.size:
        doc = np.searchsorted(np.cumsum(counts), empty, "right")
        script[empty] = sb.char_script[batch.chars(np.minimum(gs[empty], sb.doc_byte_start[doc + 1] - 1)
                                                   .clip(0, n_bytes - 1))]
    return first_char, script


def separators_old(cps):
    first, last = SEPARATORS_IN_PIECES
    return not np.any(cps - first <= last - first)


def separators_new(cps):
    first, last = SEPARATORS_IN_PIECES
    return not cps.size or bool(cps.min() > last) or not np.any(cps - first <= last - first)


def alignment_before() -> type:
    """The Alignment class of spm_alignment.py at ``BEFORE``."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:fertility/tokenizers/spm_alignment.py"],
                            check=True, capture_output=True, text=True).stdout
    module = sys.modules["spm_alignment_before"] = types.ModuleType("spm_alignment_before")  # (for dataclasses)
    exec(compile(source, "spm_alignment_before", "exec"), module.__dict__)
    return module.Alignment


def with_class(alignment, cls):
    """``alignment``'s state (its tables as filled so far) under the methods of ``cls``."""
    out = cls.__new__(cls)
    out.__dict__.update(alignment.__dict__)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer-dir", default=str(SHARED))
    args = parser.parse_args()
    tok = load_tokenizer("bnlp-bn-spm", args.tokenizer_dir)
    real_spans = tok._alignment.spans
    before = alignment_before()
    for lang, paths in FILES.items():
        docs = head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000)
        bs = batches(docs)
        prepared = [prepare_batch(b) for b in bs]
        compare("fill", lang, fill_both_sides, scripts._fill_from_neighbours, [fill_args(b) for b in bs])
        compare("text bytes", lang,
                lambda texts, _: np.fromiter((len(t.encode("utf-8")) for t in texts), dtype=np.int64,
                                             count=len(texts)),
                lambda _, batch: np.diff(batch.scripted.doc_byte_start).astype(np.int64),
                list(zip(bs, prepared, strict=True)))
        items = []
        for batch in prepared:
            spans = tok.encode_spans(batch.texts)
            gs = np.repeat(batch.scripted.doc_byte_start[:-1], spans.counts) + spans.starts
            ge = np.repeat(batch.scripted.doc_byte_start[:-1], spans.counts) + spans.ends
            items.append((batch, gs, ge, spans.counts))
        chars = [(batch.char_runs, batch.chars(gs)) for batch, gs, _, _ in items]
        compare("take", lang, lambda runs, c: runs[c], lambda runs, c: runs.take(c), chars)
        compare("token script", lang, token_script_old, token_script_new, items)
        compare("separators", lang, separators_old, separators_new, [(b.scripted.cps,) for b in prepared])
        calls = []
        tok._alignment.spans = lambda *a, calls=calls: calls.append(a) or real_spans(*a)
        for b in bs:
            tok.encode_spans(b)
        tok._alignment.spans = real_spans
        compare("spm alignment", lang, with_class(tok._alignment, before).spans, real_spans, calls)
        in_situ(tok, lang, docs, before)


def in_situ(tok, lang: str, docs: list[str], before: type) -> None:
    checkout = type(tok._alignment)
    runs: dict[str, list[tuple[float, int]]] = {"old": [], "new": []}
    for i in range(20):
        which = ("new", "old")[i % 2]
        tok._alignment.__class__ = before if which == "old" else checkout
        faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        analyze([tok], {lang: docs}, detail_every=1, progress=False)
        runs[which].append((1e3 * (time.process_time() - start),
                            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))
    tok._alignment.__class__ = checkout
    print(f"{'spm alignment in situ':<20} {lang:<3} " + "   ".join(
        f"{k} " + ", ".join(f"{ms:.1f} ms/{n} faults" for ms, n in sorted(v)[:3]) for k, v in runs.items()))


if __name__ == "__main__":
    main()
