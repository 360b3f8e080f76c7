"""corpus.read.sources.partition: every document read by exactly one task, the work dealt evenly, counters once."""

from __future__ import annotations

import gzip

import pytest

from corpus.read.sources import parse_source, partition


def _read(sources, rank, world_size, **kw):
    counters = [{} for _ in sources]
    docs = list(partition(sources, rank, world_size, unit_docs=10, bad_utf8="skip", min_language_score=None,
                          counters=counters, **kw))
    return docs, counters


@pytest.mark.parametrize("max_chars", [None, 10_000])
def test_small_sources_are_dealt_round_the_tasks(tmp_path, max_chars):
    # Eight sources of one block each (fewer files than tasks): split by blocks, which must not all land on
    # the first task; each document goes to exactly one task; a bad line is counted once over the tasks.
    sources = []
    for i in range(8):
        path = tmp_path / f"s{i}.txt.gz"
        lines = [f"source {i} line {j} with some words".encode() for j in range(8)] + [b"\xff bad"]
        path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
        sources.append(parse_source(f"en={path}"))
    (one, c1), (r0, c0), (r1, c_1) = (_read(sources, 0, 1, max_chars=max_chars),
                                       _read(sources, 0, 2, max_chars=max_chars),
                                       _read(sources, 1, 2, max_chars=max_chars))
    assert sorted(d.uid for d in r0 + r1) == [d.uid for d in one]  # disjoint, complete, canonical order
    assert len(r0) == len(r1) == len(one) // 2
    for s in range(8):
        assert c0[s].get("bad_utf8", 0) + c_1[s].get("bad_utf8", 0) == c1[s]["bad_utf8"] == 1
