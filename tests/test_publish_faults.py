"""The fault harness: for every command that writes an output folder (every ``--out`` of the output-folder
role, found by walking the commands' parsers), the contract's invariants after

1. a second writer: another process holds OUT's lock; the command is refused at once in one line naming it,
   and OUT is as it was;
2. a signal at every step of the publish that puts the result at OUT (each rename or exchange, each write of
   the writer's journal, the removal of the old result: counted through those operations, never timed): one
   line, exit 143, OUT holds the old result or the new one, whole; the next writer of OUT finishes what was
   left (the work a rerun resumes from is kept), and the same command run again completes with nothing left
   beside OUT;
3. the machine failing a write (ENOSPC, EMFILE, EIO in turn, at a seeded choice of three of the command's
   file-system writes: the atomic writes, the folders made, the publish's renames): one line, exit 74, no traceback, OUT
   holds the old result, and the same command run again finishes.

A new command with an output folder fails :func:`test_every_publishing_command_is_in_the_harness` until it has
a recipe here; one whose recipe runs without the lock or the publish of ``common.outdir`` fails the cases.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from common import fileio, outdir, writer
from common.cli import EXIT_MACHINE
from common.outdir import is_ours
from common.paths import Role
from common.signals import raise_on_signals
from common.writer import writing
from tests.common.test_path_roles import path_options
from tests.common.test_writer import Steps

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SEED = 38
HOLD = """
import sys
from common.writer import writing
with writing(sys.argv[1], "holder --out X"):
    print("held", flush=True)
    sys.stdin.read()
"""


@dataclass
class Recipe:
    """How to run one publishing command small: ``argv(inputs, out)`` for ``main``; ``result`` the file whose
    presence makes a result whole; ``variant(n)`` arguments that make the n-th result differ from the others
    (a command that does nothing when asked for the result OUT holds already)."""

    main: Callable[[list[str]], int]
    argv: Callable[[Path, Path], list[str]]
    result: str
    variant: Callable[[int], list[str]] = lambda n: []

    def run(self, inputs: Path, out: Path, n: int) -> int:
        return self.main([*self.argv(inputs, out), "--overwrite", *self.variant(n)])


def _inputs(root: Path) -> Path:
    import gzip

    data = root / "inputs"
    data.mkdir(exist_ok=True)
    for lang, name in [("bn", "bn/poems-pd-banglakosh.txt.gz"), ("en", "en/wiki-en-chinapedia.txt.gz")]:
        lines = gzip.decompress((SAMPLE / name).read_bytes()).decode().splitlines()[:60]
        (data / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


def _fertility(argv: list[str]) -> int:
    from fertility.cli import main
    return main(argv)


def _tokenizers_train(argv: list[str]) -> int:
    from tokenizers_train.cli import main
    return main(argv)


def _corpus(argv: list[str]) -> int:
    from corpus.cli import main
    return main(argv)


def _pretrain(argv: list[str]) -> int:
    from pretrain.cli import main
    return main(argv)


def _checkpoint(data: Path) -> Path:
    """A micro run's checkpoint (made once per inputs folder), for the export."""
    from pretrain.train.checkpoint import latest_checkpoint
    from pretrain.train.sample_shards import write_shard_set
    from tests.pretrain.conftest import micro_args

    run = data / "run"
    if not run.exists():  # GPT-2 ids: the export needs a tokenizer it can load
        shards = write_shard_set(data / "shards", {"bn": [data / "bn.txt"], "en": [data / "en.txt"]},
                                 train_chars=12000, val_chars=3000)
        assert _pretrain(micro_args(shards, run, 2)) == 0
    return latest_checkpoint(run)


RECIPES = {
    ("fertility", ("report",)): Recipe(
        _fertility, lambda d, o: ["report", "--no-progress", "--text", f"bn={d / 'bn.txt'}", "--text",
                                  f"en={d / 'en.txt'}", "--tokenizer", "gpt2", "--out", str(o)], "report.json"),
    ("tokenizers-train", ()): Recipe(
        _tokenizers_train, lambda d, o: ["--text", f"bn={d / 'bn.txt'}", "--text", f"en={d / 'en.txt'}",
                                         "--vocab-size", "512", "--whole-graphemes", "off", "--phrase-fraction", "0",
                                         "--probe-chars", "4000", "--max-chars-per-source", "30000", "--naive",
                                         "--no-progress", "--out", str(o)], "tokenizer.json"),
    ("corpus", ("build",)): Recipe(
        _corpus, lambda d, o: ["build", "--source", f"bn={d / 'bn.txt'}", "--source", f"en={d / 'en.txt'}",
                               "--tokenizer", "gpt2", "--mix", "bn=0.5,en=0.5", "--tokens", "1000", "--val-tokens",
                               "100", "--workers", "1", "--no-progress", "--out", str(o)], "manifest.json",
        lambda n: ["--seed", str(n)]),
    ("pretrain", ("export",)): Recipe(
        _pretrain, lambda d, o: ["export", "--checkpoint", str(_checkpoint(d)), "--out", str(o)], "config.json"),
}
# Writes its folder in place (a training run): no publish to interrupt; its lock is checked in case 1.
IN_PLACE = {("pretrain", ("launch",)): Recipe(
    _pretrain, lambda d, o: ["launch", "--config", "tiny", "--data", str(d / "shards"), "--out", str(o),
                             "--max-steps", "1"], "config.json")}

# Name an output folder they do not write, each for its reason.
NOT_WRITTEN = {
    ("corpus", ("plan",)): "the later build's OUT, checked now so that the build is not refused after its ingest",
    ("python -m pretrain.guard.supervisor", ()): "the run it watches, whose launch holds the run's lock",
}


def test_every_publishing_command_is_in_the_harness():
    commands = {(command, chain) for command, chain, action in path_options((Role.OUTPUT_DIR,))}
    assert commands - set(NOT_WRITTEN) == set(RECIPES) | set(IN_PLACE), "give each publishing command a recipe here"


def _one_line(code: int, err: str, expected_code: int, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == expected_code, (code, err[-3000:])
    assert "Traceback" not in err and len([ln for ln in lines if "error" in ln or "stopped" in ln]) == 1, err
    for word in words:
        assert word in err, (word, err)


def _whole(out: Path, recipe: Recipe) -> bool:
    return is_ours(out) and any(out.rglob(recipe.result))


def _beside(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    return _inputs(tmp_path_factory.mktemp("inputs"))


@pytest.mark.slow
@pytest.mark.parametrize("key", [*RECIPES, *IN_PLACE], ids=lambda k: " ".join([k[0], *k[1]]) if k else "")
def test_a_second_writer_is_refused_in_one_line_and_out_is_untouched(key, inputs, tmp_path, capfd):
    recipe = {**RECIPES, **IN_PLACE}[key]
    if key in IN_PLACE:
        _checkpoint(inputs)  # its shards
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline() == "held\n"
        capfd.readouterr()
        code = recipe.main(recipe.argv(inputs, out))
        _one_line(code, capfd.readouterr().err, 2, "is being written by holder --out X", f"pid {holder.pid}")
        assert not out.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)


class PublishSteps(Steps):
    """:class:`Steps` of the publish onto OUT only (not of the command's other publishes: a checkpoint's
    rounds)."""

    def __init__(self, monkeypatch, out: Path, stop: int, at: Callable[[], None]) -> None:
        super().__init__(monkeypatch, stop, at)
        self.out, self.active = writer.canonical(out), False
        publish = outdir.publish_dir

        def publish_dir(staged, target, **kwargs):
            self.active = writer.canonical(target) == self.out
            try:
                return publish(staged, target, **kwargs)
            finally:
                self.active = False
        for module in _modules_using_publish_dir():
            monkeypatch.setattr(module, "publish_dir", publish_dir)

    def step(self) -> None:
        if self.active:
            super().step()


def _modules_using_publish_dir() -> list:
    return [m for m in list(sys.modules.values())
            if getattr(m, "publish_dir", None) is outdir.publish_dir and m is not outdir]


def resumable(out: Path) -> set[str]:
    """What a command stopped by a signal keeps beside OUT for its rerun to resume from."""
    return {f".{out.name}.building", f".{out.name}.checkpoint"}


@pytest.fixture
def signals_raise():
    raise_on_signals()
    yield
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.mark.slow
@pytest.mark.parametrize("key", list(RECIPES), ids=lambda k: " ".join([k[0], *k[1]]))
def test_a_signal_at_every_step_of_the_publish_leaves_old_or_new(key, inputs, tmp_path, capfd, monkeypatch,
                                                                 signals_raise):
    recipe = RECIPES[key]
    out = tmp_path / "out"
    assert recipe.run(inputs, out, 0) == 0  # the old result
    with monkeypatch.context() as m:
        steps = PublishSteps(m, out, 0, lambda: None)
        assert recipe.run(inputs, out, 1) == 0
    assert steps.count >= 6, steps.count  # the publish went through the hooks
    for stop in range(1, steps.count + 1):
        capfd.readouterr()
        with monkeypatch.context() as m:
            PublishSteps(m, out, stop, lambda: os.kill(os.getpid(), signal.SIGTERM))
            code = recipe.run(inputs, out, 1 + stop)
        _one_line(code, capfd.readouterr().err, 143, "stopped by SIGTERM")
        assert _whole(out, recipe), stop  # the old result or the new one, never neither
        with writing(out, "the next command"):  # what the next command on OUT does first: finish the journal
            pass
        assert _whole(out, recipe) and set(_beside(out)) <= resumable(out), (stop, _beside(out))
    assert recipe.run(inputs, out, steps.count + 2) == 0  # and the command itself goes on from there
    assert _whole(out, recipe) and _beside(out) == []


ERRNOS = (errno.ENOSPC, errno.EMFILE, errno.EIO)
FAILURES = 3  # writes failed per command: each errno once


class FailingWrites:
    """Counts the command's file-system writes (every atomic write, folder made and publish rename) and fails
    the ``fail``-th with ``code``."""

    def __init__(self, monkeypatch, fail: int = 0, code: int = 0) -> None:
        self.count, self.fail, self.code = 0, fail, code
        for owner, name in [(fileio, "atomic_write_bytes"), (outdir, "_rename"), (outdir, "exchange"),
                            (Path, "mkdir")]:
            monkeypatch.setattr(owner, name, self.counted(getattr(owner, name)))

    def counted(self, function):
        def write(*args, **kwargs):
            self.count += 1
            if self.count == self.fail:
                path = next((a for a in args if isinstance(a, str | os.PathLike)), None)
                raise OSError(self.code, os.strerror(self.code), path)
            return function(*args, **kwargs)
        return write


@pytest.mark.slow
@pytest.mark.parametrize("key", list(RECIPES), ids=lambda k: " ".join([k[0], *k[1]]))
def test_a_failing_write_is_one_line_and_loses_nothing(key, inputs, tmp_path, capfd, monkeypatch):
    recipe = RECIPES[key]
    out = tmp_path / "out"
    assert recipe.run(inputs, out, 0) == 0
    with monkeypatch.context() as m:
        writes = FailingWrites(m)
        assert recipe.run(inputs, out, 1) == 0
    assert writes.count >= 3, writes.count
    # A seeded choice of the writes (bounded: the suite's time), each errno in turn.
    chosen = sorted(random.Random(f"{SEED}:{key}").sample(range(1, writes.count + 1), min(FAILURES, writes.count)))
    for n, fail in enumerate(chosen, 2):
        code = ERRNOS[n % len(ERRNOS)]
        capfd.readouterr()
        with monkeypatch.context() as m:
            FailingWrites(m, fail, code)
            result = recipe.run(inputs, out, n)
        err = capfd.readouterr().err
        _one_line(result, err, EXIT_MACHINE, "error")
        assert _whole(out, recipe), (fail, code)  # a whole result: the old one, unless the failure came after
        assert recipe.run(inputs, out, n) == 0, (fail, code)
        # Nothing left beside OUT but a finished result the line said it kept, for the user to move.
        left = [name for name in _beside(out) if f"kept in {out.parent / name};" not in err]
        assert _whole(out, recipe) and left == [], (fail, code, left)
