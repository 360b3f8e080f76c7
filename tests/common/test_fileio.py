"""common.fileio and common.outdir: the project's one set of atomic-write / JSON / publish helpers, and what
--out may be."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from common.errors import OutputPathError
from common.fileio import append_jsonl, atomic_write_bytes, file_sha256, read_jsonl, write_json
from common.outdir import MARKER, check_output_dir, is_ours, publish_dir, staging_dir
from common.paths import check_output_file, stamped
from common.writer import writing


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


def _publish(out, name):
    with writing(out, "test", overwrite=True), staging_dir(out) as tmp:
        (tmp / name).write_text(name)
        publish_dir(tmp, out, command="test")


def test_publish_replaces_only_a_folder_of_ours_and_refuses_a_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()  # an empty folder may be the destination
    _publish(out, "old.txt")
    assert is_ours(out) and sorted(p.name for p in out.iterdir()) == sorted([MARKER, "old.txt"])
    with pytest.raises(OutputPathError, match="--overwrite"):
        check_output_dir(out)
    check_output_dir(out, overwrite=True)
    _publish(out, "new.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "new.txt"])

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(OutputPathError, match="did not write"):
            check_output_dir(theirs, overwrite=overwrite)
    with pytest.raises(OutputPathError), writing(theirs, "test", overwrite=True), staging_dir(theirs) as tmp:
        publish_dir(tmp, theirs)
    assert (theirs / "thesis.tex").read_text() == "mine"
    (theirs / "thesis.tex").unlink()

    user_file = tmp_path / "notes.txt"
    user_file.write_text("mine")
    with pytest.raises(OutputPathError, match="not a folder"):
        check_output_dir(user_file)
    with pytest.raises(OutputPathError), writing(user_file, "test", overwrite=True), staging_dir(user_file) as tmp:
        publish_dir(tmp, user_file)
    assert user_file.read_text() == "mine"
    # A result that could not be published is kept where it was built (finished work is never lost), and said so.
    kept = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
    assert [k.split(".")[1] for k in kept] == ["notes", "theirs"] and all(is_ours(tmp_path / k) for k in kept)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in kept) == ["notes.txt", "out", "theirs"]


def test_output_folder_never_holds_the_inputs_nor_the_current_folder(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "bn.txt").write_text("text")
    monkeypatch.chdir(data)
    for out, reason in [(data, "current folder"), (tmp_path, "current folder"), (".", "current folder")]:
        with pytest.raises(OutputPathError, match=reason):
            check_output_dir(out, overwrite=True)
    monkeypatch.chdir(tmp_path / "..")
    with pytest.raises(OutputPathError, match="holds the input"):
        check_output_dir(data, overwrite=True, inputs=[data / "bn.txt"])
    with pytest.raises(OutputPathError, match="inside the input folder"):
        check_output_dir(data / "report", inputs=[data])
    assert check_output_dir(tmp_path / "report", inputs=[data / "bn.txt", "hf:some/dataset"]) == tmp_path / "report"


def test_output_in_a_read_only_place_is_refused_up_front(tmp_path):
    # /proc refuses new files even to root (CI runs as root, where a chmod 555 folder is still writable).
    for ro in [Path("/proc/1")] + ([tmp_path / "ro"] if os.geteuid() != 0 else []):
        if ro != Path("/proc/1"):
            ro.mkdir()
            ro.chmod(0o555)
        with pytest.raises(OutputPathError, match="not writable"):
            check_output_dir(ro / "a" / "b")
        with pytest.raises(OutputPathError, match="not writable"):
            check_output_file(ro / "eval.json")


def test_output_file_policy(tmp_path):
    path = tmp_path / "eval.json"
    assert check_output_file(path) == path
    path.write_text(json.dumps(stamped({})))
    with pytest.raises(OutputPathError, match="--overwrite"):
        check_output_file(path)
    assert check_output_file(path, overwrite=True) == path
    with pytest.raises(OutputPathError, match="is the input"):
        check_output_file(path, overwrite=True, inputs=[path])
    with pytest.raises(OutputPathError, match="is a folder"):
        check_output_file(tmp_path)


def test_staging_dir_is_not_private_and_is_removed_on_failure(tmp_path):
    old = os.umask(0o022)
    try:
        with pytest.raises(RuntimeError), staging_dir(tmp_path / "out") as tmp:
            assert stat.S_IMODE(tmp.stat().st_mode) == 0o755
            raise RuntimeError("boom")
    finally:
        os.umask(old)
    assert list(tmp_path.iterdir()) == []
