"""The rewrites of this change, old formulation against new, process CPU ms summed over the benchmark's batches
of 1 M characters (best of 30), each asserted equal first.

    python benchmarks/results/2026-12-04-fertility-spm/micro.py [--tokenizer-dir DIR]

* byte_char: each byte's character for mostly one-byte text (np.repeat / ones cleared at continuation bytes)
* char_script: each character's script from its cluster's (np.repeat of cluster lengths / running count + take)
* cluster_start_char: (scatter of the cluster starts / copy of the mask)
* lookup: a uint8 table at uint32 code points (fancy indexing / take)
* is_space: (an "asked" lookup, then the table / one table with -1 for "not asked")
* spm key_from / spaces: the alignment's masks (flatnonzero of uint8 flags / of bool masks)
* spm events: events ending by each piece's begin (every begin among the ends / the ends among the begins);
  the begins are the pieces' lengths laid end to end, the ends as many as the changed characters, drawn
  among them
* _below in situ: inside fertility.analyze(detail_every=1) (a second array of n counts / summed in place)
* whitespace pieces: what sentencepiece's pieces cost (the analyzer takes its words instead)
* spm alignment (all): the alignment of every text of every batch, for reference
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ of the checkout it lies in
from bench_fertility import FILES, SHARED, batches  # noqa: E402

import fertility.scoring.metrics as metrics  # noqa: E402
import fertility.scripts as scripts  # noqa: E402
import fertility.tokenizers.spm_alignment as spm_alignment  # noqa: E402
from fertility.analysis import analyze, head_documents  # noqa: E402
from fertility.graphemes import cluster_starts  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402
from fertility.tokenizers.base import flatten  # noqa: E402


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


def byte_char_repeat(sb):
    out = np.empty(int(sb.char_to_byte[-1]) + 1, dtype=np.int32)
    out[:-1] = np.repeat(np.arange(sb.cps.size, dtype=np.int32), sb.char_bytes)
    out[-1] = sb.cps.size
    return out


def byte_char_ones(sb):
    out = np.ones(int(sb.char_to_byte[-1]) + 1, dtype=np.int32)
    out[0] = 0
    wide = np.flatnonzero(sb.char_bytes > 1)
    extra = sb.char_bytes[wide].astype(np.int64) - 1
    out[np.repeat(sb.char_to_byte[wide] + 1 - (np.cumsum(extra) - extra), extra) + np.arange(int(extra.sum()))] = 0
    np.cumsum(out, out=out)
    return out


def measure(tok, lang: str, docs: list[str]) -> None:
    """Every comparison on one language's text."""
    al = tok._alignment
    bs = batches(docs)
    sbs = [scripts.scripted_batch(b) for b in bs]
    if lang == "en":
        compare("byte_char", lang, byte_char_repeat, byte_char_ones, [(sb,) for sb in sbs])
    masks = [(sb, cluster_starts(sb.cps, sb.doc_char_start)) for sb in sbs]
    compare("char_script", lang,
            lambda sb, m: np.repeat(sb.cluster_script, np.diff(sb.cluster_start, append=sb.cps.size)),
            lambda sb, m: sb.cluster_script.take(np.cumsum(m, dtype=np.int32) - 1), masks)

    def scatter(sb, m):
        out = np.zeros(sb.cps.size + 1, dtype=bool)
        out[sb.cluster_start] = True
        out[sb.doc_char_start] = True
        return out

    def copy(sb, m):
        out = np.empty(sb.cps.size + 1, dtype=bool)
        out[:-1] = m
        out[sb.doc_char_start] = True
        return out

    compare("cluster_start_char", lang, scatter, copy, masks)
    table = scripts._UTF8_WIDTH
    compare("lookup", lang, lambda sb: table[sb.cps], lambda sb: table.take(sb.cps), [(sb,) for sb in sbs])
    for sb in sbs:
        scripts.is_space(sb.cps)  # every code point classified: the old table has no "not asked" entries
    compare("is_space", lang,
            lambda sb: (bool((scripts._script_table[sb.cps] == scripts._UNCLASSIFIED).any()),
                        scripts._space_table[sb.cps].view(bool))[1],
            lambda sb: scripts.is_space(sb.cps), [(sb,) for sb in sbs])

    cps_all = [np.frombuffer("".join(b).encode("utf-32-le"), dtype=np.uint32) for b in bs]
    for cps in cps_all:
        al._classify(np.unique(cps))
    flags_all = [(cps, al._flags.take(cps)) for cps in cps_all]

    def key_from_old(cps, flags):
        k = np.flatnonzero(flags[:-1] & spm_alignment._GOES_ON)
        return k[al._second[cps[k + 1]]]

    def key_from_new(cps, flags):
        return np.flatnonzero(al._second.take(cps[1:]) & ((flags[:-1] & spm_alignment._GOES_ON) != 0))

    compare("spm key_from", lang, key_from_old, key_from_new, flags_all)
    compare("spm spaces", lang, lambda cps, f: np.flatnonzero(f & spm_alignment._SPACE),
            lambda cps, f: np.flatnonzero((f & spm_alignment._SPACE) != 0), flags_all)

    rng = np.random.default_rng(0)
    events = []
    for b, (_cps, flags) in zip(bs, flags_all, strict=True):
        ids, _ = flatten(tok._sp.encode(b))
        where = np.cumsum(al._norm_len[ids].clip(0)) - al._norm_len[ids].clip(0)
        n_events = int(np.count_nonzero(flags & spm_alignment._CHANGED))
        events.append((np.sort(rng.choice(where, size=n_events)), where))
    compare("spm events", lang, lambda ends, where: np.searchsorted(ends, where, "right"),
            lambda ends, where: np.cumsum(np.bincount(np.searchsorted(where, ends, "left"),
                                                      minlength=where.size + 1))[:-1], events)

    spent = {"old": 0.0, "new": 0.0}
    real = metrics._below

    def below_old(values, limits, n):
        return np.cumsum(np.bincount(values + 1, minlength=n + 2))[limits]

    def timed(key, fn):
        def run(*a):
            start = time.process_time()
            out = fn(*a)
            spent[key] += time.process_time() - start
            return out
        return run

    found = {"old": [], "new": []}
    try:
        for _ in range(8):
            for key, fn in (("old", below_old), ("new", real)):
                metrics._below = timed(key, fn)
                spent[key] = 0.0
                analyze([tok], {lang: docs}, detail_every=1, progress=False)
                found[key].append(spent[key])
    finally:
        metrics._below = real
    print(f"{'_below in situ':<20} {lang:<3} old {1e3 * min(found['old']):7.2f}   new {1e3 * min(found['new']):7.2f}")
    print(f"{'whitespace pieces':<20} {lang:<3}     {best(lambda: [tok.pretokenize_batch(b) for b in bs]):7.2f}")
    alignment = [(b, *flatten(tok._sp.encode(b))) for b in bs]
    print(f"{'spm alignment (all)':<20} {lang:<3}     {best(lambda: [al.spans(*a) for a in alignment]):7.2f}")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer-dir", default=str(SHARED))
    args = parser.parse_args()
    tok = load_tokenizer("bnlp-bn-spm", args.tokenizer_dir)
    for lang, paths in FILES.items():
        measure(tok, lang, head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000))


if __name__ == "__main__":
    main()
