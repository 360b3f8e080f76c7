"""Publishing an output folder (``common.outdir``) where OUT is a symbolic link or a mount point: the user's link
or mount is never renamed or replaced; a mount point is refused before any work; a rename that fails all the
same loses nothing and says so in one line."""

from __future__ import annotations

import os

import pytest

from common.errors import OutputPathError
from common.outdir import MARKER, PublishError, check_publishable, is_ours, publish_dir, staging_dir
from common.writer import writing


def _publish(out, name):
    with writing(out, "test", overwrite=True), staging_dir(out) as tmp:
        (tmp / name).write_text(name)
        publish_dir(tmp, out, command="test")


def _tree(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else
                                       os.readlink(p) if p.is_symlink() else None) for p in sorted(root.rglob("*"))}


def test_a_symlink_to_an_empty_folder_is_filled_at_its_target_and_stays_a_link(tmp_path):
    target = tmp_path / "volume" / "results"
    target.mkdir(parents=True)
    link = tmp_path / "out"
    link.symlink_to(target)
    check_publishable(link)
    _publish(link, "report.json")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "report.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "volume"]  # no .out.old-PID, no staging left
    assert sorted(p.name for p in target.parent.iterdir()) == ["results"]
    _publish(link, "again.json")  # ours now: replaced at the target (the caller checked --overwrite)
    assert link.is_symlink() and sorted(p.name for p in target.iterdir()) == [MARKER, "again.json"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["results"]


@pytest.mark.parametrize("kind", ["tmpfs", "read-only tmpfs", "bind mount", "a link to a mount point"])
def test_a_mount_point_is_refused_before_any_work(kind, tmp_path, mount_point):
    mount = mount_point("volume", read_only=kind == "read-only tmpfs", bind=kind == "bind mount")
    out = mount
    if kind == "a link to a mount point":
        out = tmp_path / "out"
        out.symlink_to(mount)
    before = _tree(tmp_path)
    with pytest.raises(OutputPathError, match="mount point") as e:
        check_publishable(out)
    assert str(out) in str(e.value) and "\n" not in str(e.value)
    assert _tree(tmp_path) == before


def test_a_rename_refused_with_ebusy_loses_nothing(tmp_path, busy_rename):
    out = tmp_path / "out"
    _publish(out, "old.json")
    before = _tree(out)
    busy_rename(out)
    with pytest.raises(PublishError, match="Device or resource busy") as e:
        _publish(out, "new.json")
    assert _tree(out) == before and is_ours(out)  # the earlier result is back in place
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".out.") and p.name.endswith(".tmp")]
    assert len(kept) == 1 and (kept[0] / "new.json").is_file() and str(kept[0]) in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", kept[0].name])  # no .old left either


def test_a_real_bind_mount_fails_the_rename_in_one_line_and_keeps_the_result(tmp_path, mount_point):
    """What the up-front check (common.outdir.check_publishable) exists for: past it, the rename onto a bind
    mount fails (EBUSY, measured), and publish_dir keeps the result and says so in one line."""
    out = mount_point("out", bind=True)
    with pytest.raises(PublishError, match="busy"):
        _publish(out, "report.json")
    assert not any(out.iterdir())
    kept = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(kept) == 1 and (kept[0] / "report.json").is_file()
