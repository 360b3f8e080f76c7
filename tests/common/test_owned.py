"""Deletion by ownership (``common.owned``): only what the project can prove it made is ever removed."""

from __future__ import annotations

import json

import pytest

from common.errors import OutputPathError
from common.owned import OWNER, check_claimable, claim, make, owned, record, remove


def _tree(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_a_folder_made_whole_is_removed_whole_and_only_with_its_token(tmp_path):
    mine = make(tmp_path / "ck", "checkpoint")
    (tmp_path / "ck" / "key.json").write_text("{}")
    assert owned(tmp_path / "ck", "checkpoint") == mine
    assert owned(tmp_path / "ck", "corpus work") is None  # another role proves nothing
    record_path = tmp_path / "ck" / OWNER
    forged = json.loads(record_path.read_text()) | {"token": "0" * 32}
    record_path.write_text(json.dumps(forged))
    assert not remove(mine) and (tmp_path / "ck" / "key.json").is_file()  # not the folder this process made
    record_path.write_text(json.dumps(forged | {"token": mine.token}))
    assert remove(mine) and not (tmp_path / "ck").exists()


def test_a_copy_under_another_name_and_a_user_folder_with_a_key_file_are_not_ours(tmp_path):
    make(tmp_path / "ck", "checkpoint")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / OWNER).write_bytes((tmp_path / "ck" / OWNER).read_bytes())
    assert owned(tmp_path / "copy", "checkpoint") is None
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "key.json").write_text('{"key": "x"}')
    assert owned(tmp_path / "user", "checkpoint") is None
    with pytest.raises(OutputPathError, match="did not make"):
        check_claimable(tmp_path / "user", "checkpoint", "--x")


@pytest.mark.parametrize("start", ["new", "empty"])
def test_a_claimed_folder_loses_only_the_recorded_entries(tmp_path, start):
    work = tmp_path / "work"
    if start == "empty":
        work.mkdir()
    mine = claim(work, "corpus work", "--work-dir")
    record(mine, "t1", "ingest.json")
    (work / "t1" / "docs").mkdir(parents=True)
    (work / "t1" / "docs" / "0.npz").write_bytes(b"x")
    (work / "ingest.json").write_text("{}")
    (work / "notes.txt").write_text("the user's, added during the build")
    with pytest.raises(OutputPathError, match="notes.txt"):
        record(mine, "notes.txt")  # there and not ours: never recorded, never removed
    assert claim(work, "corpus work", "--work-dir") == mine  # a rerun proves it
    assert remove(mine)
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt"]  # kept, with the folder that holds it

    other = tmp_path / "other"
    if start == "empty":
        other.mkdir()
    mine = claim(other, "corpus work", "--work-dir")
    record(mine, "t1")
    (other / "t1").mkdir()
    assert remove(mine)
    assert other.exists() == (start == "empty")  # the folder itself only when the project made it
    assert not other.exists() or not any(other.iterdir())


@pytest.mark.parametrize("what", ["files", "a file"])
def test_a_user_path_is_refused_and_unchanged(tmp_path, what):
    user = tmp_path / "user"
    if what == "files":
        (user / "sub").mkdir(parents=True)
        (user / "thesis.tex").write_text("mine")
        (user / "sub" / "data.csv").write_text("1,2")
    else:
        user.write_text("mine")
    before = _tree(tmp_path)
    with pytest.raises(OutputPathError, match="--work-dir"):
        claim(user, "corpus work", "--work-dir")
    assert _tree(tmp_path) == before


def test_a_url_folder_follows_the_same_rule():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    url = "memory://owned-test/work"
    mine = claim(url, "corpus work", "--work-dir")
    record(mine, "t1")
    fs.pipe("/owned-test/work/t1/a.bin", b"x")
    fs.pipe("/owned-test/work/theirs.txt", b"y")
    assert remove(mine)
    assert fs.cat("/owned-test/work/theirs.txt") == b"y" and not fs.exists("/owned-test/work/t1")
    with pytest.raises(OutputPathError, match="did not make"):
        claim(url, "corpus work", "--work-dir")
    fs.rm("/owned-test", recursive=True)


def test_the_current_folder_is_proved_the_same_by_any_name_and_a_link_is_refused(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    mine = claim(".", "corpus work", "--work-dir")
    assert owned(work, "corpus work") is not None and owned(".", "corpus work") == mine
    assert remove(mine) and work.is_dir() and not any(work.iterdir())  # not made here: kept, emptied of ours
    (tmp_path / "link").symlink_to(work)
    with pytest.raises(OutputPathError, match="symbolic link"):
        check_claimable(tmp_path / "link", "corpus work", "--work-dir")
