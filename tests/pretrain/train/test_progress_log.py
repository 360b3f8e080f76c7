"""What `pretrain launch` writes to stderr while it trains: a bar on a terminal only; in a log file (a Slurm job's, a
redirect) or with --no-progress, one plain line every ``train.log_interval`` steps, never a carriage return."""

from __future__ import annotations

import io
import re
import sys

import pytest

from pretrain.cli import main

PROGRESS_LINE = re.compile(r"^\[pretrain\] step (\d+)/(\d+): loss \S+, lr \S+, [\d,]+ tokens/s, \d+:\d\d:\d\d left$",
                           re.MULTILINE)


def logged_steps(steps: int, interval: int) -> list[int]:
    """The steps a run of ``steps`` from scratch reports: the first, every ``interval``-th and the last."""
    return sorted({1, steps, *range(interval, steps + 1, interval)})


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def launch(micro, data, out, stderr, steps: int, interval: int, *extra: str) -> None:
    """A micro launch of ``steps`` steps reporting every ``interval``, with ``stderr`` as sys.stderr."""
    args = micro.args(data, out, steps, "--set", f"train.log_interval={interval}", *extra)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stderr", stderr)
        assert main(args) == 0


@pytest.mark.parametrize(("steps", "interval"), [(7, 3), (4, 10)])
def test_a_log_file_gets_one_plain_line_per_interval(micro, synthetic_shards, tmp_path, steps, interval):
    log = tmp_path / "launch.log"
    with open(log, "w", encoding="utf-8") as stderr:  # a real file, as under Slurm or `2> launch.log`
        launch(micro, synthetic_shards, tmp_path / "run", stderr, steps, interval)
    text = log.read_bytes().decode()  # as written: read_text would turn a carriage return into a newline
    assert "\r" not in text
    reported = [(int(step), int(total)) for step, total in PROGRESS_LINE.findall(text)]
    assert reported == [(step, steps) for step in logged_steps(steps, interval)], text


def test_no_progress_on_a_terminal_draws_no_bar(micro, synthetic_shards, tmp_path):
    steps, interval = 5, 2
    drawn = Terminal()
    launch(micro, synthetic_shards, tmp_path / "bar", drawn, steps, interval)
    assert "\r" in drawn.getvalue() and not PROGRESS_LINE.search(drawn.getvalue())  # the bar, as before
    plain = Terminal()
    launch(micro, synthetic_shards, tmp_path / "plain", plain, steps, interval, "--no-progress")
    assert "\r" not in plain.getvalue()
    assert [int(step) for step, _ in PROGRESS_LINE.findall(plain.getvalue())] == logged_steps(steps, interval)


def test_export_to_a_log_file_draws_no_bar(tiny_run, tmp_path):
    """transformers draws a bar while it writes the weights; not into a file."""
    from pretrain.train.checkpoint import latest_checkpoint

    log = tmp_path / "export.log"
    with open(log, "w", encoding="utf-8") as stderr, pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stderr", stderr)
        assert main(["export", "--checkpoint", str(latest_checkpoint(tiny_run)), "--out", str(tmp_path / "hf")]) == 0
    assert b"\r" not in log.read_bytes()
