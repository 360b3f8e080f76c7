"""A JSONL record's or a parquet cell's text longer than a piece is cut as the same text on one plain line is."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fertility.text
from fertility.text import TextError, cut_pieces, iter_documents

PIECE = 4096


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(fertility.text, "PIECE_BYTES", PIECE)


def _long_text(n_words: int = 20_000) -> str:
    return " ".join(f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(n_words))  # about 200 kB, Bangla and Latin


def _jsonl(path, texts, field="text"):
    data = "".join(json.dumps({"id": i, field: t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("name", ["big.jsonl", "big.jsonl.gz"])
def test_a_long_jsonl_record_comes_in_bounded_pieces_in_order(tmp_path, small_pieces, name):
    text = _long_text()
    p = _jsonl(tmp_path / name, ["before", text, "after"])
    docs = list(iter_documents(str(p)))
    assert docs[0].text == "before" and docs[-1].text == "after" and docs[-1].line == 3
    pieces = docs[1:-1]
    assert len(pieces) > 20 and all(d.line == 2 for d in pieces)
    assert max(len(d.text.encode()) for d in pieces) <= 2 * PIECE
    assert "".join(d.text for d in pieces) == text  # every piece ends after a space: nothing lost, no word cut
    assert all(d.text.endswith(" ") for d in pieces[:-1])


def test_a_long_record_is_cut_exactly_as_the_same_plain_line(tmp_path, small_pieces):
    for text in (_long_text(), "অআইঈউ" * 3000, "x" * (3 * PIECE), "ক" * (PIECE // 3) + "খ"):  # no whitespace too
        plain = tmp_path / "same.txt"
        plain.write_text(text + "\nnext\n", encoding="utf-8")
        record = _jsonl(tmp_path / "same.jsonl", [text, "next"])
        from_plain = [(d.text, d.line) for d in iter_documents(str(plain))]
        assert [(d.text, d.line) for d in iter_documents(str(record))] == from_plain
        assert list(cut_pieces(text)) == [t for t, line in from_plain if line == 1]


def test_records_under_the_limit_are_unchanged(tmp_path, small_pieces):
    texts = ["ছোট", "a\nb  ", "ক" * (PIECE // 3 - 1), "x" * (PIECE - 1), "  "]  # the last two: just under a piece
    p = _jsonl(tmp_path / "small.jsonl", texts)
    assert [(d.text, d.line) for d in iter_documents(str(p))] == [(t, i) for i, t in enumerate(texts, 1)]


def test_a_long_record_keeps_its_newlines_and_all_its_text(tmp_path, small_pieces):
    paragraphs = [" ".join(f"বাক্য{i}-{j}" for j in range(40)) for i in range(300)]
    text = "\n".join(paragraphs) + "\n\r\ttail"
    p = _jsonl(tmp_path / "lines.jsonl", [text], field="body")
    docs = list(iter_documents(f"{p}:body"))
    assert len(docs) > 10 and "".join(d.text for d in docs) == text
    assert max(len(d.text.encode()) for d in docs) <= 2 * PIECE


def test_a_record_of_only_whitespace_pieces_keeps_its_text(tmp_path, small_pieces):
    text = "শুরু" + " " * (5 * PIECE) + "শেষ"
    p = _jsonl(tmp_path / "spaces.jsonl", [text])
    docs = [d.text for d in iter_documents(str(p))]
    assert all(d.strip() for d in docs)  # pieces that are only whitespace are left out, as a plain line's are
    assert "".join(docs).split() == ["শুরু", "শেষ"] and max(len(d.encode()) for d in docs) <= 2 * PIECE


def test_a_long_parquet_cell_comes_in_bounded_pieces_with_its_row(tmp_path, small_pieces):
    text = _long_text()
    p = tmp_path / "cells.parquet"
    pq.write_table(pa.table({"text": ["first", None, text, "last"]}), p)
    docs = list(iter_documents(str(p)))
    assert (docs[0].text, docs[0].line) == ("first", 1) and (docs[-1].text, docs[-1].line) == ("last", 4)
    pieces = docs[1:-1]
    assert len(pieces) > 20 and {d.line for d in pieces} == {3}
    assert max(len(d.text.encode()) for d in pieces) <= 2 * PIECE and "".join(d.text for d in pieces) == text
    assert [d.text for d in pieces] == list(cut_pieces(text))


def test_max_chars_cuts_within_a_long_record(tmp_path):
    """At the real piece size: a 4.6 MB record read with --max-chars 100000 gives about 100000 characters."""
    words = [f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(400_000)]
    p = _jsonl(tmp_path / "one.jsonl", [" ".join(words)])
    docs = list(iter_documents(str(p), max_chars=100_000))
    assert 99_000 < sum(len(d.text) for d in docs) <= 100_000
    assert max(len(d.text.encode()) for d in docs) <= 2 << 20


def test_a_record_over_the_record_limit_is_still_refused(tmp_path, small_pieces, monkeypatch):
    monkeypatch.setattr(fertility.text, "MAX_RECORD_BYTES", 8 * PIECE)
    ok = _jsonl(tmp_path / "ok.jsonl", ["y" * (8 * PIECE - 21)])  # the line (with its JSON) just at the limit
    assert len(ok.read_bytes()) == 8 * PIECE + 1  # and its newline
    assert "".join(d.text for d in iter_documents(str(ok))) == "y" * (8 * PIECE - 21)
    big = _jsonl(tmp_path / "big.jsonl", ["y" * (8 * PIECE - 20)])
    with pytest.raises(TextError, match=r"big\.jsonl:1: a line longer than"):
        list(iter_documents(str(big)))
