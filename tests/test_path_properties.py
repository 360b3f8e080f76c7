"""Whatever places a user points a command's path options at, nothing of theirs changes and no traceback shows.

For each command, Hypothesis draws the value of each path option from places planted in a fresh folder: a
user's file, a user's folder with files, an input text, the inputs' folder, the current folder, a symlink to
the user's folder, a run's own files (config.json, a checkpoint), shards, a tokenizer's folder and file, a
name too long for the system, and (for outputs only) a fresh path. The command runs in this process; then
every planted file's bytes, every link and every folder's listing must be as before, and stderr must hold no
traceback. A drawn line that is valid does the real work on tiny inputs (30 lines of text, a few thousand
tokens, a preflight), so that what happens after the checks is tried too.

Fixed seed (``derandomize``) and a few examples per command keep CI reproducible and the file near a minute.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.outdir import MARKER

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
GPT2 = ROOT / "data" / "tokenizers" / "gpt2"

EXAMPLES = settings(derandomize=True, max_examples=10, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Places a path option's value is drawn from (relative to the planted folder; "." is the current folder).
INPUT_PLACES = ["user/notes.txt", "user", "data/bn.txt", "data", ".", "cwd", "link", "run", "run/config.json",
                "run/checkpoints/best.pt", "shards", "shards/manifest.json", "tok", "tok/vocab.json", "x" * 300]
OUTPUT_PLACES = [*INPUT_PLACES, "fresh"]


def _head(name: str, lines: int) -> bytes:
    with gzip.open(SAMPLE / name, "rb") as f:
        return b"".join(next(f) for _ in range(lines))


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    """Real shards of the gpt2 tokenizer from the sample text (a few thousand tokens)."""
    from pretrain.train.sample_shards import SAMPLE_SOURCES, write_shard_set

    return write_shard_set(tmp_path_factory.mktemp("shards") / "shards", SAMPLE_SOURCES, train_chars=20_000,
                           val_chars=4_000)


def plant(root: Path, shards: Path) -> None:
    (root / "cwd").mkdir()
    (root / "cwd" / "keep.txt").write_text("the user's work in the current folder\n")
    (root / "user").mkdir()
    (root / "user" / "notes.txt").write_text("the user's notes\n")
    (root / "user" / "photo.jpg").write_bytes(b"\xff\xd8 a photo")
    (root / "data").mkdir()
    (root / "data" / "bn.txt").write_bytes(_head("bn/literature-bnarchive.txt.gz", 30))
    (root / "data" / "en.txt").write_bytes(_head("en/wiki-en-chinapedia.txt.gz", 30))
    (root / "link").symlink_to(root / "user")
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / MARKER).write_text(json.dumps({"written_by": "bangla-tokfair", "command": "pretrain launch"}))
    (run / "config.json").write_text("{}\n")
    (run / "checkpoints" / "best.pt").write_bytes(b"the weights of a long training")
    shutil.copytree(shards, root / "shards")
    shutil.copytree(GPT2, root / "tok")


def snapshot(root: Path) -> dict[str, object]:
    """Every planted entry: a file's sha256, a link's target, a folder's listing. Fresh outputs are the
    command's (their names hold "fresh")."""
    seen: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if "fresh" not in d]
            files = [f for f in files if "fresh" not in f]
        seen[f"{rel}/"] = sorted(dirs + files)
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                seen[str(rel / name)] = os.readlink(path)
            elif path.is_file():
                seen[str(rel / name)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def place(root: Path, name: str) -> str:
    """A planted place by name; "." is the current folder, "@NAME" a value that is no place (a tokenizer name)."""
    return name[1:] if name.startswith("@") else "." if name == "." else str(root / name)


def check_command(main: Callable[[list[str]], int], argv_of: Callable[[Callable[[str], str]], list[str]],
                  shards: Path, capfd) -> None:
    """Plant, run ``main(argv)`` from root/cwd, and assert that nothing planted changed and no traceback."""
    with tempfile.TemporaryDirectory(prefix="roles-") as tmp:
        root = Path(tmp)
        plant(root, shards)
        argv = argv_of(lambda name: place(root, name))
        before = snapshot(root)
        capfd.readouterr()
        with contextlib.chdir(root / "cwd"):
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code
        err = capfd.readouterr().err
        assert "Traceback" not in err, (argv, err)
        assert code in (0, 1, 2), (argv, code, err)
        assert snapshot(root) == before, (argv, err)


def pick(data, flag: str, valid: str | None, places: list[str]) -> str | None:
    """A place for ``flag``: its valid value two times in three (so that whole lines often pass the checks
    and do the work, with the other options drawn), else any planted place (None: the option is left out)."""
    return data.draw(st.one_of(st.just(valid), st.just(valid), st.sampled_from(places)), label=flag)


def option(data, at, flag: str, valid: str | None, places: list[str], prefix: str = "") -> list[str]:
    name = pick(data, flag, valid, places)
    return [] if name is None else [flag, prefix + at(name)]


def overwrite(data) -> list[str]:
    return ["--overwrite"] if data.draw(st.booleans(), label="--overwrite") else []


# --- each command's line: ``argv(data, at)``, every path option drawn (``at`` turns a place into its path) ------

def fertility_report(data, at):
    return ["report", "--no-progress", "--max-chars", "3000", "--detail-every", "1",
            *option(data, at, "--text", "data/bn.txt", INPUT_PLACES, "bn="),
            *option(data, at, "--tokenizer", "@gpt2", INPUT_PLACES),
            *option(data, at, "--tokenizer-dir", None, INPUT_PLACES),
            *option(data, at, "--out", "fresh", OUTPUT_PLACES), *overwrite(data)]


def fertility_serve(data, at):
    # The shelf of tokenizers is built and checked; the test's patch keeps it from listening.
    return ["serve", *option(data, at, "--tokenizer", "tok", INPUT_PLACES),
            *option(data, at, "--tokenizer-dir", None, INPUT_PLACES)]


def tokenizers_train(data, at):
    return [*option(data, at, "--text", "data/bn.txt", INPUT_PLACES, "bn="), "--text", f"en={at('data/en.txt')}",
            "--vocab-size", "384", "--shares", "bn=0.5,en=0.5", "--max-rounds", "1", "--no-progress",
            "--max-validation-chars", "2000", *option(data, at, "--reference", None, INPUT_PLACES),
            *option(data, at, "--tokenizer-dir", None, INPUT_PLACES),
            *option(data, at, "--out", "fresh", OUTPUT_PLACES), *overwrite(data)]


# The work folder is drawn from every place a user might name: the ones its role refuses up front, and a user's
# folder and a link to it, which the ownership rule refuses because they hold files it did not make (at
# 8847140 this draw found `--work-dir data` removing the inputs' folder).
WORK_PLACES = ["data", ".", "cwd", "data/bn.txt", "user/notes.txt", "user", "link", "x" * 300]


def _corpus(data, at, command: str) -> list[str]:
    return [command, *option(data, at, "--source", "data/bn.txt", INPUT_PLACES, "bn="),
            "--source", f"en={at('data/en.txt')}", *option(data, at, "--tokenizer", "@gpt2", INPUT_PLACES),
            "--mix", "bn=0.5,en=0.5", "--tokens", "2000", "--val-tokens", "100", "--workers", "1", "--no-progress",
            "--no-near-dedup", *option(data, at, "--status-file", None, OUTPUT_PLACES),
            *option(data, at, "--work-dir", None, WORK_PLACES),
            *option(data, at, "--out", "fresh" if command == "build" else None, OUTPUT_PLACES)]


def corpus_build(data, at):
    return [*_corpus(data, at, "build"), *overwrite(data)]


def corpus_plan(data, at):
    return _corpus(data, at, "plan")


def corpus_inspect(data, at):
    return ["inspect", at(pick(data, "dir", "shards", INPUT_PLACES)), "--no-progress"]


MICRO = ["--set", "model.n_layer=1", "--set", "model.n_embd=32", "--set", "model.n_head=2", "--set",
         "model.block_size=32", "--set", "train.global_batch_tokens=128", "--set", "data.micro_batch=4",
         "--set", "train.tensorboard=no", "--set", "train.threads=1", "--set", "train.preflight_steps=1"]


def pretrain_launch(data, at):
    return ["launch", *option(data, at, "--config", "@tiny", INPUT_PLACES),
            *option(data, at, "--data", "shards", INPUT_PLACES), *option(data, at, "--out", "fresh", OUTPUT_PLACES),
            *option(data, at, "--resume-from", None, INPUT_PLACES), "--max-steps", "2", "--preflight-only",
            "--no-supervisor", "--no-eval", "--device", "cpu", *MICRO]


def pretrain_eval(data, at):
    return ["eval", *option(data, at, "--run", "run", INPUT_PLACES),
            *option(data, at, "--checkpoint", None, INPUT_PLACES), *option(data, at, "--data", None, INPUT_PLACES),
            *option(data, at, "--text", None, INPUT_PLACES, "bn="), "--device", "cpu", "--max-tokens", "64",
            "--samples", "0", *option(data, at, "--out", "fresh", OUTPUT_PLACES), *overwrite(data)]


def pretrain_bench(data, at):
    return ["bench", "--steps", "1", "--warmup", "0", "--no-hf", "--seq-len", "16", "--micro-batch", "1",
            "--vocab-size", "256", "--device", "cpu", "--compile", "no",
            *option(data, at, "--out", "fresh", OUTPUT_PLACES), *overwrite(data)]


def pretrain_export(data, at):
    return ["export", *option(data, at, "--checkpoint", "run/checkpoints/best.pt", INPUT_PLACES),
            *option(data, at, "--eval", None, INPUT_PLACES), *option(data, at, "--data", None, INPUT_PLACES),
            *option(data, at, "--tokenizer", None, INPUT_PLACES), *option(data, at, "--out", "fresh", OUTPUT_PLACES),
            *overwrite(data)]


# command -> (the module whose main runs it, its line)
COMMANDS = {
    "fertility report": ("fertility.cli", fertility_report),
    "fertility serve": ("fertility.cli", fertility_serve),
    "tokenizers-train": ("tokenizers_train.cli", tokenizers_train),
    "corpus build": ("corpus.cli", corpus_build),
    "corpus plan": ("corpus.cli", corpus_plan),
    "corpus inspect": ("corpus.cli", corpus_inspect),
    "pretrain launch --preflight-only": ("pretrain.cli", pretrain_launch),
    "pretrain eval": ("pretrain.cli", pretrain_eval),
    "pretrain bench": ("pretrain.cli", pretrain_bench),
    "pretrain export": ("pretrain.cli", pretrain_export),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@EXAMPLES
@given(data=st.data())
def test_nothing_planted_changes_and_no_traceback(command, data, shards, capfd, monkeypatch):
    import fertility.present.serve

    monkeypatch.setattr(fertility.present.serve, "serve", lambda *a, **k: None)  # `fertility serve` never listens
    module, argv = COMMANDS[command]
    check_command(importlib.import_module(module).main, lambda at: argv(data, at), shards, capfd)


def test_every_command_and_subcommand_is_drawn():
    import argparse

    for module in {m for m, _ in COMMANDS.values()}:
        parser = importlib.import_module(module).build_parser()
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        names = [f"{parser.prog} {name}" for a in subs for name in a.choices] or [parser.prog]
        assert all(any(c == n or c.startswith(n + " ") for c in COMMANDS) for n in names), (names, list(COMMANDS))
