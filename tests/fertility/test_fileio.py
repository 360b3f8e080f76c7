"""fertility.fileio: the project's one set of atomic-write / JSON / publish helpers."""

from __future__ import annotations

import json
import os
import stat

import pytest

from fertility.fileio import (
    OutputPathError,
    append_jsonl,
    atomic_write_bytes,
    check_output_dir,
    file_sha256,
    publish_dir,
    read_jsonl,
    staging_dir,
    write_json,
)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "f"
    atomic_write_bytes(path, b"old")

    class Boom:
        def __len__(self):
            raise RuntimeError("boom")

        def __buffer__(self, flags):
            raise RuntimeError("boom")

    with pytest.raises((RuntimeError, TypeError)):
        atomic_write_bytes(path, Boom())
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_atomic_write_gives_plain_open_mode(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644


def test_write_json_refuses_nan_and_keeps_unicode(tmp_path):
    write_json(tmp_path / "a.json", {"bn": "বাংলা"})
    assert "বাংলা" in (tmp_path / "a.json").read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        write_json(tmp_path / "a.json", {"x": float("nan")})
    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8")) == {"bn": "বাংলা"}


def test_read_jsonl_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "m.jsonl"
    assert read_jsonl(path) == []
    append_jsonl(path, {"step": 1})
    append_jsonl(path, {"step": 2})
    with open(path, "a") as f:
        f.write('{"step": 3')  # a writer killed mid-line
    assert read_jsonl(path) == [{"step": 1}, {"step": 2}]


def test_file_sha256(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert file_sha256(tmp_path / "f") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_publish_replaces_a_folder_and_refuses_a_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with staging_dir(out) as tmp:
        (tmp / "new.txt").write_text("new")
        publish_dir(tmp, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in out.iterdir()] == ["new.txt"]

    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    with pytest.raises(OutputPathError, match="not a folder"):
        check_output_dir(user_file)
    with pytest.raises(OutputPathError), staging_dir(user_file) as tmp:
        publish_dir(tmp, user_file)
    assert user_file.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "out"]


def test_staging_dir_is_not_private_and_is_removed_on_failure(tmp_path):
    old = os.umask(0o022)
    try:
        with pytest.raises(RuntimeError), staging_dir(tmp_path / "out") as tmp:
            assert stat.S_IMODE(tmp.stat().st_mode) == 0o755
            raise RuntimeError("boom")
    finally:
        os.umask(old)
    assert list(tmp_path.iterdir()) == []
