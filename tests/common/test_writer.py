"""One writer per output (``common.writer``) and the publish as one transaction (``common.outdir.publish_dir``):
a second writer is refused naming the first, a killed writer leaves no lock, and whatever stops a publish at
any of its steps (a signal, ``kill -9``) OUT holds the old result or the new one, and the next writer of the
same OUT removes or puts back what was left. The steps are counted through the publish's own operations (its
renames, the journal's writes, the removal of the old result), not timed."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from common import outdir, writer
from common.outdir import MARKER, is_ours, publish_dir, staging_dir
from common.signals import Interrupted, raise_on_signals
from common.writer import Busy, writing

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys
from common.writer import writing
with writing(sys.argv[1], "holder --out X"):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes the pipe
"""


def _holder(out: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline() == "held\n"  # the lock is taken: synchronised on the holder's word, not a sleep
    return proc


def _publish(out: Path, name: str, *, overwrite: bool = True) -> None:
    with writing(out, "test", overwrite=overwrite), staging_dir(out) as tmp:
        (tmp / name).write_text(name)
        publish_dir(tmp, out, command="test")


def _result(out: Path) -> str | None:
    """The one result at OUT ("old" or "new"), complete, or None when there is none."""
    if not out.is_dir():
        return None
    names = sorted(p.name for p in out.iterdir())
    assert names in ([MARKER, "old"], [MARKER, "new"]), names  # never a mixture
    return names[1]


def test_a_second_writer_is_refused_in_one_line_naming_the_first(tmp_path):
    out = tmp_path / "out"
    proc = _holder(out)
    try:
        with pytest.raises(Busy) as e, writing(out, "test"):
            pass
        message = str(e.value)
        assert "\n" not in message and f"holder --out X (pid {proc.pid}" in message and str(out) in message
        # Its companions are the same output: the staging and checkpoint folders beside it, and a path to it
        # through a link or "..".
        link = tmp_path / "link"
        link.symlink_to(out, target_is_directory=True)
        for same in (tmp_path / "sub" / ".." / "out", link):
            (tmp_path / "sub").mkdir(exist_ok=True)
            with pytest.raises(Busy), writing(same, "test"):
                pass
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
    with writing(out, "test") as held:
        assert held.covers(tmp_path / ".out.checkpoint" / "round1") and not held.covers(tmp_path / "outside")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "sub"]  # no lock file once released


def test_a_killed_writer_leaves_no_lock(tmp_path):
    out = tmp_path / "out"
    proc = _holder(out)
    proc.kill()
    proc.wait(timeout=120)
    _publish(out, "new")  # the kernel released the lock with the process
    assert _result(out) == "new"


def test_out_through_dot_dot_is_resolved_once(tmp_path):
    out = tmp_path / "X"
    _publish(out, "old")
    _publish(tmp_path / "X" / ".." / "X", "new")  # X is renamed aside meanwhile: X/.. must not be walked again
    assert _result(out) == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["X"]


def test_the_publish_refuses_a_result_that_appeared_since_the_check_without_overwrite(tmp_path):
    out = tmp_path / "out"
    with writing(out, "test", overwrite=False), staging_dir(out) as tmp:
        (tmp / "new").write_text("new")
        out.mkdir()
        (out / MARKER).write_text("{}")  # another result, finished while this one was built
        (out / "old").write_text("old")
        with pytest.raises(outdir.PublishError, match="since this command began"):
            publish_dir(tmp, out, command="test")
    assert _result(out) == "old" and (tmp / "new").is_file()  # both kept: the new one where it was built


class Steps:
    """Counts the publish's steps (each rename, journal write and removal of the old result, before and after)
    and calls ``at`` on step ``stop``."""

    def __init__(self, monkeypatch, stop: int, at) -> None:
        self.count, self.stop, self.at = 0, stop, at
        for owner, name in [(outdir, "_rename"), (outdir, "exchange"), (writer.Writer, "_save"),
                            (outdir.shutil, "rmtree")]:
            monkeypatch.setattr(owner, name, self.wrap(getattr(owner, name)))

    def wrap(self, function):
        def counted(*args, **kwargs):
            self.step()
            result = function(*args, **kwargs)
            self.step()
            return result
        return counted

    def step(self) -> None:
        self.count += 1
        if self.count == self.stop:
            self.at()


def _no_exchange(*_args) -> None:
    raise OSError(errno.EINVAL, "Invalid argument")  # a file system without RENAME_EXCHANGE (NFS, some FUSE)


def _steps_of_a_publish(tmp_path, monkeypatch) -> int:
    out = tmp_path / "count" / "out"
    _publish(out, "old")
    with monkeypatch.context() as m:
        steps = Steps(m, 0, lambda: None)
        _publish(out, "new")
    assert steps.count >= 8  # the hooks are in place: renames or the exchange, journal writes, the removal
    return steps.count


@pytest.mark.parametrize("exchange", [True, False], ids=["one exchange", "two renames"])
def test_kill_9_at_every_step_of_a_publish_leaves_old_or_new_and_the_next_writer_finishes(exchange, tmp_path,
                                                                                          monkeypatch):
    if not exchange:
        monkeypatch.setattr(outdir, "exchange", _no_exchange)
    total = _steps_of_a_publish(tmp_path, monkeypatch)
    seen = set()
    for stop in range(1, total + 1):
        out = tmp_path / f"k{stop}" / "out"
        _publish(out, "old")
        pid = os.fork()
        if pid == 0:  # the writer, killed at this step: nothing of its own runs after (no finally, no handler)
            try:
                with monkeypatch.context() as m:
                    Steps(m, stop, lambda: os.kill(os.getpid(), signal.SIGKILL))
                    _publish(out, "new")
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if exchange:  # not even an instant without a result at OUT
            assert _result(out) in ("old", "new"), stop
        with writing(out, "test"):  # the next writer of OUT puts back or removes what the killed one left
            pass
        seen.add(_result(out))
        assert _result(out) in ("old", "new"), stop
        assert sorted(p.name for p in out.parent.iterdir()) == ["out"] and is_ours(out), stop
    assert seen == {"old", "new"}


@pytest.mark.parametrize("exchange", [True, False], ids=["one exchange", "two renames"])
def test_a_signal_at_every_step_of_a_publish_waits_for_the_swap(exchange, tmp_path, monkeypatch):
    if not exchange:
        monkeypatch.setattr(outdir, "exchange", _no_exchange)
    total = _steps_of_a_publish(tmp_path, monkeypatch)
    raise_on_signals()
    # Another thread, as a real command has (a tokenizer's, a logger's): the kernel may hand it the signal.
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        for stop in range(1, total + 1):
            out = tmp_path / f"s{stop}" / "out"
            _publish(out, "old")
            with monkeypatch.context() as m, pytest.raises(Interrupted):
                Steps(m, stop, lambda: os.kill(os.getpid(), signal.SIGTERM))
                _publish(out, "new")
            assert _result(out) in ("old", "new"), stop
            with writing(out, "test"):
                pass
            assert sorted(p.name for p in out.parent.iterdir()) == ["out"], stop
    finally:
        done.set()
        other.join()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
