"""The training sample of a JSONL source with one long record: its text arrives in bounded pieces, all of it."""

from __future__ import annotations

import json

import fertility.text
from fertility.text import TextSource
from tokenizers_train import sampling

PIECE = 4096


def test_a_long_record_is_read_in_pieces_no_longer_than_a_plain_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(fertility.text, "PIECE_BYTES", PIECE)
    text = " ".join(f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(40_000))  # about 400 kB, already NFC
    p = tmp_path / "one.jsonl"
    p.write_text(json.dumps({"text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("bn", str(p))], tmp_path / "work", progress=False,
                                     max_validation_chars=10**9)
    info, lt = prepared.sources[0], prepared.languages["bn"]
    assert info.documents == len(list(fertility.text.cut_pieces(text))) > 40
    lines = lt.train_path.read_text(encoding="utf-8").splitlines()
    assert max(len(line.encode()) for line in lines) <= 2 * PIECE
    # every piece is trained on or held aside, whole: none of the text is lost
    assert info.train_chars + info.validation_chars == len(text)
    assert sorted(" ".join(lines + lt.validation).split()) == sorted(text.split())
