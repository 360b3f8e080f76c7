"""corpus.read.sources.partition on a long JSONL record or parquet cell: bounded pieces, consecutive ids."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fertility.text
from corpus.read.sources import parse_source, partition, uid
from fertility.text import cut_pieces

PIECE = 4096


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(fertility.text, "PIECE_BYTES", PIECE)


def _read(spec, world_size=1, rank=0):
    source = parse_source(spec)
    return list(partition([source], rank, world_size, unit_docs=10, max_chars=None, bad_utf8="fail",
                          min_language_score=None, counters=[{}]))


def _long_text() -> str:
    return " ".join(f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(20_000))


def _write(folder, kind, texts):
    if kind == "parquet":
        path = folder / "part-0.parquet"
        pq.write_table(pa.table({"text": texts}), path)
    else:
        path = folder / "part-0.jsonl"
        path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
@pytest.mark.parametrize("file_set", [False, True], ids=["file", "file-set"])
def test_a_long_document_becomes_consecutive_pieces(tmp_path, small_pieces, kind, file_set):
    text = _long_text()
    path = _write(tmp_path, kind, ["first", text, "last"])
    docs = _read(f"bn={tmp_path / 'part-*'}" if file_set else f"bn={path}")
    pieces = list(cut_pieces(text))
    assert len(pieces) > 20 and max(len(p.encode()) for p in pieces) <= 2 * PIECE
    assert [d.text for d in docs] == ["first", *pieces, "last"]
    # the pieces take consecutive rows and the documents after them move up, as a long plain line's pieces do
    assert [d.uid for d in docs] == [uid(0, 0, row) for row in range(len(pieces) + 2)]
    assert all(d.n_bytes == len(d.text.encode()) for d in docs)


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_the_tasks_still_share_the_pieces_exactly(tmp_path, small_pieces, kind):
    _write(tmp_path, kind, ["a b c", _long_text(), *[f"doc {i}" for i in range(30)]])
    spec = f"bn={tmp_path / ('part-0.' + kind)}"
    one = _read(spec)
    two = _read(spec, 2, 0) + _read(spec, 2, 1)
    assert sorted(d.uid for d in two) == [d.uid for d in one] and len({d.uid for d in one}) == len(one)
    assert {d.uid: d.text for d in two} == {d.uid: d.text for d in one}


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_short_documents_keep_their_ids(tmp_path, small_pieces, kind):
    texts = ["এক", "দুই", "x" * (PIECE - 10), "তিন"]
    path = _write(tmp_path, kind, texts)
    docs = _read(f"bn={path}")
    assert [(d.uid, d.text) for d in docs] == [(uid(0, 0, row), t) for row, t in enumerate(texts)]
