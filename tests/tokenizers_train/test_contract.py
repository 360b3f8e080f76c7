"""``tokenizers-train`` and the command-line contract (docs/contract.md): every bad input is exit 2 and one line
naming what is wrong, before any work (no text read into the checkpoint, no round trained), and nothing of the
user's is touched; a signal ends a run with one line and exit 130/143, and the same command then resumes to
the result of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.fileio import file_sha256
from tokenizers_train.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data(input_folder, sample_head) -> Path:
    """The user's input folder: small bn/en texts and some bad files."""
    return input_folder({
        "bn.txt": sample_head("bn/poems-pd-banglakosh.txt.gz", 60),
        "en.txt": sample_head("en/wiki-en-chinapedia.txt.gz", 60),
        "latin1.txt": "ঠিক আছে\n".encode() + "café\n".encode("latin-1"),
        "docs.jsonl": json.dumps({"text": "ভালো"}) + "\n",
        "empty.txt": b"",
        "corrupt.json": "{not a tokenizer",
    })


def call(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(["--no-progress", *argv])
    except SystemExit as e:  # argparse's errors (one line, exit 2) end the parse
        code = e.code
    return code, capsys.readouterr().err


# case -> (arguments given data folder D and OUT O, the names the error line must hold). Every case trains on
# bn and en from D unless it gives its own --text, and ends with --out O unless it names its own --out.
def cases(d: Path, o: Path) -> dict[str, tuple[list[str], list[str]]]:
    return {
        "--sample-chars -5": (["--sample-chars", "-5"], ["--sample-chars", "-5"]),
        "--sample-chars 0": (["--sample-chars", "0"], ["--sample-chars", "positive"]),
        "--vocab-size not a multiple of 64": (["--vocab-size", "1000"], ["--vocab-size", "multiple of 64", "1024"]),
        "--vocab-size 0": (["--vocab-size", "0"], ["--vocab-size", "positive"]),
        "--vocab-size smaller than the alphabet": (["--vocab-size", "256"], ["256", "smaller than the alphabet"]),
        "--holdout 0": (["--holdout", "0"], ["--holdout", "fraction"]),
        "--holdout 1.5": (["--holdout", "1.5"], ["--holdout", "fraction"]),
        "--holdout 0.6": (["--holdout", "0.6"], ["--holdout", "0.5"]),
        "--tolerance under 1": (["--tolerance", "0.9"], ["--tolerance", ">= 1"]),
        "--max-rounds 0": (["--max-rounds", "0"], ["--max-rounds", "positive"]),
        "--probe-chars 0": (["--probe-chars", "0"], ["--probe-chars", "positive"]),
        "--max-repeats 0": (["--max-repeats", "0"], ["--max-repeats", "positive"]),
        "--balance-by unknown": (["--balance-by", "bytes"], ["--balance-by", "bytes", "premium", "chars-per-token"]),
        "--phrase-fraction 1.5": (["--phrase-fraction", "1.5"], ["--phrase-fraction", "share"]),
        # the finding: refused as "phrase_fraction must be in [0, 1)", the internal name, not the option's
        "--phrase-fraction 1": (["--phrase-fraction", "1"], ["--phrase-fraction", "under 1", "got 1"]),
        # the finding: an OverflowError traceback
        "--vocab-size 1e30": (["--vocab-size", "1e30"], ["--vocab-size", "at most 1048576", "1e30"]),
        "--vocab-size over the largest": (["--vocab-size", str(2**20 + 64)], ["--vocab-size", "at most 1048576"]),
        # the finding: trained, on 1 character per language, with no word; a sample needs a character per token
        "--sample-chars under the vocabulary": (["--sample-chars", "1"], ["--sample-chars 1", "512", "--vocab-size"]),
        # the finding: a --tokenizer-dir that does not exist was silently ignored
        "--tokenizer-dir missing": (["--reference", "gpt2", "--tokenizer-dir", str(d / "nope")], ["nope"]),
        # the trained tokenizer is named after OUT: a reference of the same name is refused before any training
        "--reference named like OUT": (["--reference", "gpt2", "--out", str(o.parent / "gpt2")],
                                        ["share a name", "gpt2, gpt2", "--out"]),
        "--min-frequency 0": (["--min-frequency", "0"], ["--min-frequency", "positive"]),
        "--max-token-length -1": (["--max-token-length", "-1"], ["--max-token-length"]),
        "--max-chars-per-source nan": (["--max-chars-per-source", "nan"], ["--max-chars-per-source", "'nan'"]),
        "--max-validation-chars 0": (["--max-validation-chars", "0"], ["--max-validation-chars"]),
        "--temperature 0": (["--temperature", "0"], ["--temperature", "positive"]),
        "--shares with --temperature": (["--shares", "bn=0.5,en=0.5", "--temperature", "2"],
                                        ["--temperature", "--shares"]),
        "--shares naming a language without text": (["--shares", "bn=0.5,hi=0.5"], ["--shares", "hi", "en"]),
        "--shares not a number": (["--shares", "bn=half,en=0.5"], ["--shares", "'half'"]),
        "--target naming a language without text": (["--target", "xx=4"], ["targets name", "xx"]),
        "--target and --parity": (["--target", "bn=4", "--parity", "en"], ["--parity", "--target"]),
        "--parity not a label": (["--parity", "e/n"], ["--parity", "e/n"]),
        "--backend unknown": (["--backend", "wordpiece"], ["--backend", "wordpiece"]),
        "--whole-graphemes on with spm": (["--backend", "spm-bpe", "--whole-graphemes", "on"],
                                          ["whole-grapheme", "spm-bpe"]),
        "--reference corrupt": (["--reference", str(d / "corrupt.json")], ["corrupt.json", "not a valid"]),
        "--reference unknown name": (["--reference", "gpt7"], ["'gpt7'", "unknown tokenizer"]),
        "label that climbs": (["--text", f"../../victim={d / 'bn.txt'}", "--text", f"en={d / 'en.txt'}"],
                              ["--text", "'../../victim'", "label"]),
        "label with /": (["--text", f"b/n={d / 'bn.txt'}", "--text", f"en={d / 'en.txt'}"], ["--text", "'b/n'"]),
        "LANG=PATH without =": (["--text", str(d / "bn.txt")], ["--text", "LANG=PATH"]),
        "missing file": (["--text", f"bn={d / 'nope.txt'}", "--text", f"en={d / 'en.txt'}"],
                         ["nope.txt", "no such file"]),
        "empty file": (["--text", f"bn={d / 'empty.txt'}", "--text", f"en={d / 'en.txt'}"],
                       ["empty.txt", "no documents"]),
        "bad JSONL field": (["--text", f"bn={d / 'docs.jsonl'}:body", "--text", f"en={d / 'en.txt'}"],
                            ["docs.jsonl:1", "'body'"]),
        # --- the parallel dev set (--parallel, --flores, --flores-split)
        "--flores-split unknown": (["--flores-split", "test"], ["--flores-split", "test"]),
        "--parallel without =": (["--parallel", str(d / "bn.txt")], ["--parallel", "LANG=PATH"]),
        "--parallel missing file": (["--parallel", f"bn={d / 'nope.txt'}", "--parallel", f"en={d / 'en.txt'}"],
                                    ["nope.txt"]),
        "--parallel a language twice": (["--parallel", f"bn={d / 'bn.txt'}", "--parallel", f"bn={d / 'en.txt'}"],
                                        ["--parallel", "'bn'", "twice"]),
        "--parallel and --flores": (["--parallel", f"bn={d / 'bn.txt'}", "--flores", str(d)],
                                    ["--flores", "--parallel"]),
        "--flores not a folder": (["--flores", str(d / "bn.txt")], ["--flores", "bn.txt"]),
        "--out is an existing file": (["--out", str(o.parent / "notes.txt")], ["notes.txt", "not a folder"]),
        "--out is the folder of the text, --overwrite": (["--out", str(d), "--overwrite"], [str(d), "input"]),
        "--out is the current folder": (["--out", "."], ["--out", "current folder"]),
        "--out in a read-only place": (["--out", "/proc/1/tokenizers/tok"], ["/proc/1", "not writable"]),
        "--out a folder of the user's, --overwrite": (["--out", str(o), "--overwrite"], [str(o), "did not write"]),
        "--out an earlier result, no --overwrite": (["--out", str(o)], [str(o), "--overwrite"]),
        "the checkpoint's place is a folder of the user's": ([], [".tok.checkpoint", "not one"]),
    }


CASES = list(cases(Path("D"), Path("O")))


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, data, tmp_path, capsys, monkeypatch, bad_input_case):
    from tokenizers_train import backends, sampling

    out = tmp_path / "out" / "tok"
    texts = ["--text", f"bn={data / 'bn.txt'}", "--text", f"en={data / 'en.txt'}"]
    # user_files makes the checkpoint's place a folder, with a file of the user's in it
    user_checkpoint = (out.with_name(".tok.checkpoint"),) if case == "the checkpoint's place is a folder of the user's" else ()
    laid = bad_input_case(case, cases, data, out, {"--text": texts}, more_folders=user_checkpoint)
    for name, module in (("prepare_text", sampling), ("train", backends)):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("work started before the input was checked"))

    laid.check(*call(["--vocab-size", "512", *laid.args], capsys))


def test_there_are_enough_cases():
    assert len(CASES) >= 30


def test_non_utf8_names_file_and_line_and_no_flag_the_command_lacks(data, tmp_path, capsys, input_error):
    code, err = call(["--text", f"bn={data / 'latin1.txt'}", "--text", f"en={data / 'en.txt'}",
                      "--out", str(tmp_path / "tok")], capsys)
    input_error(code, err, "latin1.txt:2", "UTF-8")
    assert "--skip-bad-utf8" not in err  # tokenizers-train has no such flag
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_label_never_becomes_a_file(data, tmp_path, capsys, monkeypatch, input_error):
    """The finding: ``--text '../../victim=bn.txt'`` wrote the prepared text to ../../victim.txt (exit 0)."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    monkeypatch.chdir(work)
    code, err = call(["--text", f"../../victim={data / 'bn.txt'}", "--text", f"en={data / 'en.txt'}",
                      "--vocab-size", "512", "--whole-graphemes", "off", "--out", "tok"], capsys)
    input_error(code, err, "'../../victim'")
    assert victim.read_text() == "the user's own file\n"
    assert list(work.iterdir()) == []


def test_the_prepared_text_refuses_a_label_that_is_a_path(data, tmp_path):
    from common.errors import InputError
    from fertility.text import TextSource
    from tokenizers_train.sampling import prepare_text

    with pytest.raises(InputError, match="label"):
        prepare_text([TextSource("../victim", str(data / "bn.txt"))], tmp_path / "work", progress=False)
    assert not (tmp_path / "victim.txt").exists()


# --- signals -----------------------------------------------------------------------------------------------------

HOLD = Path(__file__).with_name("hold_round.py")


def _argv(data: Path, out: Path) -> list[str]:
    # Balance (the default): two probe rounds, then full rounds; a tiny vocabulary on the head of the sample.
    return ["--text", f"bn={data / 'bn.txt'}", "--text", f"en={data / 'en.txt'}", "--vocab-size", "512",
            "--whole-graphemes", "off", "--phrase-fraction", "0", "--holdout", "0.1", "--probe-chars", "4000",
            "--max-chars-per-source", "30000", "--naive", "--no-progress", "--out", str(out)]


def _outputs(out: Path) -> dict[str, str]:
    files = {p.relative_to(out).as_posix(): file_sha256(p) for p in out.rglob("tokenizer.json")}
    report = json.loads((out / "training_report.json").read_text())
    rounds = [{**r, "seconds": 0} for r in report["rounds"]]
    return {**files, "rounds": json.dumps(rounds, sort_keys=True)}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_training_is_one_line_and_the_rerun_gives_the_uninterrupted_result(
        signum, data, tmp_path, interrupt):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reference = tmp_path / "reference"
    done = subprocess.run([sys.executable, "-m", "tokenizers_train", *_argv(data, reference)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert len(json.loads((reference / "training_report.json").read_text())["rounds"]) >= 3

    out = tmp_path / "out"
    # hold_round.py runs the command with round 2 held open until a signal comes: once round 1's checkpoint is
    # complete (the command's own file), the run is certainly mid-training, whatever the machine's load.
    proc = subprocess.Popen([sys.executable, str(HOLD), "2", *_argv(data, out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    round1 = tmp_path / ".out.checkpoint" / "round1" / "step.json"

    def round1_done() -> None:
        deadline = time.monotonic() + 600
        while not round1.is_file():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "round 1 never finished"
            time.sleep(0.05)  # polling a file, not timing: the run cannot finish while round 2 is held

    stdout, stderr = interrupt(proc, signum, ready=round1_done)
    assert "finished work is kept" in stderr and stdout == ""
    assert not out.exists() and round1.is_file()  # nothing published; the finished round kept

    again = subprocess.run([sys.executable, "-m", "tokenizers_train", *_argv(data, out)], env=env,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr
    assert _outputs(out) == _outputs(reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out", "reference"]  # the checkpoint is gone


def test_a_folder_of_the_users_with_a_key_file_in_the_checkpoints_place_is_never_removed(data, tmp_path, capsys,
                                                                                          input_error):
    """Only a folder carrying this project's ownership record (``common.owned``) is a checkpoint; a file named
    key.json proves nothing (a folder holding one was removed whole)."""
    user = tmp_path / "user"
    (user / ".ky.checkpoint" / "sub").mkdir(parents=True)
    (user / ".ky.checkpoint" / "key.json").write_text('{"key": "the user\'s own"}')
    (user / ".ky.checkpoint" / "sub" / "notes.txt").write_text("the user's notes")
    before = {str(p): p.read_bytes() if p.is_file() else None for p in sorted(user.rglob("*"))}
    code, err = call(["--vocab-size", "512", "--text", f"bn={data / 'bn.txt'}", "--text", f"en={data / 'en.txt'}",
                      "--out", str(user / "ky")], capsys)
    input_error(code, err, ".ky.checkpoint", "not one")
    assert {str(p): p.read_bytes() if p.is_file() else None for p in sorted(user.rglob("*"))} == before


def test_out_a_symlink_to_an_empty_folder_is_filled_at_its_target(data, tmp_path, capsys):
    """The user's link stays a link (it was renamed to .LINK.old-PID, then a traceback)."""
    target = tmp_path / "volume" / "tok"
    target.mkdir(parents=True)
    link = tmp_path / "tok"
    link.symlink_to(target)
    code, err = call(["--vocab-size", "1024", "--max-rounds", "1", "--text", f"bn={data / 'bn.txt'}",
                      "--text", f"en={data / 'en.txt'}", "--out", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target) and (target / "tokenizer.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "tok", "volume"]  # no checkpoint left either
    assert sorted(p.name for p in target.parent.iterdir()) == ["tok"]


@pytest.mark.parametrize("read_only", [False, True])
def test_out_a_mount_point_is_refused_before_any_work(read_only, data, tmp_path, capsys, monkeypatch, mount_point,
                                                      input_error):
    from tokenizers_train import sampling

    out = mount_point("volume", read_only=read_only)
    monkeypatch.setattr(sampling, "prepare_text", lambda *a, **k: pytest.fail("work started before --out was checked"))
    code, err = call(["--vocab-size", "512", "--text", f"bn={data / 'bn.txt'}", "--text", f"en={data / 'en.txt'}",
                      "--out", str(out)], capsys)
    input_error(code, err, str(out), "mount point")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "volume"] and not any(out.iterdir())
