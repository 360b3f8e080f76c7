"""``fertility report`` and the command-line contract (docs/contract.md): every bad input is exit 2 and one
line naming what is wrong, before any work, and nothing of the user's is touched (a file of theirs planted
beside the inputs and beside or inside OUT stays byte for byte)."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest

from common.outdir import MARKER
from fertility.cli import main


@pytest.fixture
def data(input_folder, sample_head) -> Path:
    """The user's input folder: small bn/en texts, a parallel pair, a FLORES folder and some bad files."""
    gz = gzip.compress(("বাংলা লেখা\n" * 200).encode())
    parallel = {code: sample_head(f"parallel/{code}.txt.gz", 20) for code in ("ben_Beng", "eng_Latn")}
    return input_folder({
        "bn.txt": sample_head("bn/literature-bnarchive.txt.gz", 30),
        "en.txt": sample_head("en/wiki-en-chinapedia.txt.gz", 30),
        **{f"{code}.txt": text for code, text in parallel.items()},
        **{f"flores/devtest/{code}.devtest": text for code, text in parallel.items()},
        "short.txt": "one\ntwo\n",
        "latin1.txt": "ভালো\n".encode() + b"caf\xe9\n",
        "docs.jsonl": json.dumps({"text": "ভালো"}) + "\n",
        "empty.txt": b"",
        "cut.txt.gz": gz[: len(gz) // 2],
        "broken.tiktoken": "this is not a ranks file\n",
    })


def call(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(["report", "--no-progress", *argv])
    except SystemExit as e:  # argparse's errors (one line, exit 2) end the parse
        code = e.code
    return code, capsys.readouterr().err


# case -> (arguments given data folder D and OUT O, the names the error line must hold). "gpt2" is the
# tokenizer unless a case names its own; every case ends with --out O unless it names its own --out.
def cases(d: Path, o: Path) -> dict[str, tuple[list[str], list[str]]]:
    bn, en = f"bn={d / 'bn.txt'}", f"en={d / 'en.txt'}"
    par = ["--parallel", f"bn={d / 'ben_Beng.txt'}", "--parallel", f"en={d / 'eng_Latn.txt'}"]
    return {
        "missing file": (["--text", f"bn={d / 'nope.txt'}"], ["nope.txt", "no such file"]),
        "LANG=PATH without =": (["--text", str(d / "bn.txt")], ["--text", "LANG=PATH"]),
        "LANG=PATH with empty path": (["--text", "bn="], ["--text", "LANG=PATH"]),
        "label with /": (["--text", f"b/n={d / 'bn.txt'}"], ["--text", "'b/n'", "label"]),
        "label that climbs": (["--text", f"../../victim={d / 'bn.txt'}"], ["--text", "'../../victim'"]),
        "label starting with a digit": (["--text", f"1bn={d / 'bn.txt'}"], ["'1bn'"]),
        "parallel label with /": (["--text", en, "--parallel", f"x/y={d / 'ben_Beng.txt'}"], ["--parallel", "'x/y'"]),
        "reference not a label": (["--text", en, *par, "--reference", "e/n"], ["--reference", "e/n"]),
        "unknown tokenizer": (["--text", en, "--tokenizer", "gpt7"], ["'gpt7'", "unknown tokenizer"]),
        "corrupt tokenizer": (["--text", en, "--tokenizer", str(d / "broken.tiktoken")], ["broken.tiktoken"]),
        "missing tokenizer path": (["--text", en, "--tokenizer", str(d / "none" / "tokenizer.json")],
                                   ["none/tokenizer.json"]),
        "same tokenizer twice": (["--text", en, "--tokenizer", "gpt2", "--tokenizer", "gpt2"], ["share a name"]),
        "bad JSONL field": (["--text", f"bn={d / 'docs.jsonl'}:body"], ["docs.jsonl:1", "'body'"]),
        "non-UTF-8 without the skip flag": (["--text", f"bn={d / 'latin1.txt'}"],
                                            ["latin1.txt:2", "UTF-8", "--skip-bad-utf8"]),
        "truncated gzip": (["--text", f"bn={d / 'cut.txt.gz'}"], ["cut.txt.gz", "truncated"]),
        "empty file": (["--text", f"bn={d / 'empty.txt'}"], ["empty.txt", "no documents"]),
        "no text at all": ([], ["no text"]),
        "duplicate --parallel language": (["--text", en, "--parallel", f"bn={d / 'ben_Beng.txt'}",
                                           "--parallel", f"bn={d / 'eng_Latn.txt'}"], ["--parallel", "'bn'", "twice"]),
        "misaligned parallel": (["--text", en, "--parallel", f"bn={d / 'ben_Beng.txt'}",
                                 "--parallel", f"en={d / 'short.txt'}"], ["short.txt", "line-aligned"]),
        "reference without parallel text": (["--text", en, *par, "--reference", "hi"], ["'hi'", "--reference"]),
        "--flores missing folder": (["--flores", str(d / "no-flores")], ["no-flores", "devtest"]),
        "--flores and --parallel": (["--flores", str(d / "flores"), *par], ["--flores", "--parallel"]),
        "--max-chars 0": (["--text", bn, "--max-chars", "0"], ["--max-chars", "positive"]),
        "--max-chars -5": (["--text", bn, "--max-chars", "-5"], ["--max-chars", "-5"]),
        "--max-chars not a number": (["--text", bn, "--max-chars", "lots"], ["--max-chars", "'lots'"]),
        "--detail-every 0": (["--text", bn, "--detail-every", "0"], ["--detail-every", "positive"]),
        "--flores-split unknown": (["--flores", str(d / "flores"), "--flores-split", "test"], ["--flores-split"]),
        "--out is an existing file": (["--text", bn, "--out", str(o.parent / "notes.txt")],
                                      ["notes.txt", "not a folder"]),
        "--out is the folder of the text": (["--text", bn, "--text", en, "--out", str(d)],
                                            [str(d), "input"]),
        "--out is the folder of the text, --overwrite": (["--text", bn, "--out", str(d), "--overwrite"], [str(d)]),
        "--out inside the --flores folder": (["--flores", str(d / "flores"), "--out", str(d / "flores" / "rep")],
                                             ["flores/rep", "inside the input folder"]),
        "--out is the current folder": (["--text", bn, "--out", "."], ["--out", "current folder"]),
        "--out above the current folder": (["--text", bn, "--out", ".."], ["--out", "current folder"]),
        "--out in a read-only place": (["--text", bn, "--out", "/proc/1/fertility/rep"], ["/proc/1", "not writable"]),
        "--out a folder of the user's, --overwrite": (["--text", bn, "--out", str(o), "--overwrite"],
                                                     [str(o), "did not write"]),
        "--out an earlier result, no --overwrite": (["--text", bn, "--out", str(o)], [str(o), "--overwrite"]),
    }


CASES = list(cases(Path("D"), Path("O")))


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, data, tmp_path, capsys, monkeypatch, bad_input_case):
    import fertility.analysis

    out = tmp_path / "out" / "rep"
    laid = bad_input_case(case, cases, data, out, {"--tokenizer": ["--tokenizer", "gpt2"]})
    monkeypatch.setattr(fertility.analysis, "prepare_batch",
                        lambda *a: pytest.fail("the analysis started before the input was checked"))

    laid.check(*call(laid.args, capsys))
    if case == "--out an earlier result, no --overwrite":
        assert json.loads((out / "result.json").read_text()) == {"previous": True}


def test_there_are_enough_cases():
    assert len(CASES) >= 30


def test_out_in_the_input_folder_keeps_every_input(data, tmp_path, capsys, monkeypatch, input_error):
    """The finding: ``--out DIR`` with DIR the folder the text came from deleted the inputs. With the text inside a
    folder an earlier run published (it carries the marker) and --overwrite, every input is still there."""
    (data / MARKER).write_text("{}")
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--parallel",
                      f"bn={data / 'ben_Beng.txt'}", "--parallel", f"en={data / 'eng_Latn.txt'}", "--out", "data",
                      "--overwrite"], capsys)
    input_error(code, err, "data", "holds the input")
    assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before


def test_skip_bad_utf8_is_the_way_out_the_error_names(data, tmp_path, capsys):
    out = tmp_path / "rep"
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'latin1.txt'}", "--skip-bad-utf8",
                      "--out", str(out)], capsys)
    assert code == 0, err
    assert json.loads((out / "report.json").read_text())["texts"][0]["bad_utf8"] == 1


def test_utf8_error_names_no_flag_outside_the_command(data):
    """The message itself names no flag: only a command that has one adds it (fertility report does)."""
    from fertility.text import BadUTF8Error, TextSource, iter_documents

    with pytest.raises(BadUTF8Error) as raised:
        list(iter_documents(TextSource("bn", str(data / "latin1.txt"))))
    assert "latin1.txt:2" in str(raised.value) and "--" not in str(raised.value)
    assert str(raised.value.with_hint("pass --x")).endswith("(pass --x)")


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_a_signal_is_one_line_and_leaves_no_report(signum, code, data, tmp_path, capsys, monkeypatch):
    import fertility.analysis
    from common.signals import Interrupted

    def interrupted(*_args):
        raise Interrupted(signum)  # what the handler run_command installs raises when the signal comes

    monkeypatch.setattr(fertility.analysis, "prepare_batch", interrupted)
    out = tmp_path / "rep"
    got, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--out", str(out)], capsys)
    assert got == code and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_tokenizer_name_is_not_an_input_path(data, tmp_path, capsys, monkeypatch):
    """Only inputs on disk are kept apart from OUT: ``--tokenizer gpt2 --out gpt2`` is a report named gpt2."""
    monkeypatch.chdir(tmp_path)
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--out", "gpt2"], capsys)
    assert code == 0, err
    assert (tmp_path / "gpt2" / "report.json").is_file()


def test_an_input_path_of_any_kind_is_kept_apart_from_out(data, tmp_path):
    from fertility.text import TextSource, input_paths

    (data / "hub").mkdir()
    sources = [TextSource("bn", str(data / "bn.txt")), TextSource("bn", f"hf:{data / 'hub'}"), "gpt2",
               str(data / "broken.tiktoken"), TextSource("en", "hf:someone/dataset")]
    assert input_paths(sources) == [str(data / "bn.txt"), str(data / "hub"), str(data / "broken.tiktoken")]


def test_a_progress_bar_is_cleared_before_the_error_line(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # bars are drawn on a terminal only
    code = main(["report", "--tokenizer", "gpt2", "--text", f"bn={data / 'latin1.txt'}", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "\r" in err  # a bar was drawn, and the error line is not glued to it
    assert err.rsplit("\r", 1)[-1].startswith(f"fertility: error: {data / 'latin1.txt'}:2")


def test_overwrite_never_replaces_the_output_of_another_command(data, tmp_path, capsys, input_error, user_files):
    """A run folder is ours, but --overwrite of `fertility report` replaces only an earlier report (issue 28)."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / MARKER).write_text(json.dumps({"written_by": "bangla-tokfair", "command": "pretrain launch"}))
    (run / "checkpoints" / "best.pt").write_bytes(b"fourteen megabytes of weights")
    keep = user_files(run, run / "checkpoints")
    before = sorted(run.rglob("*"))
    code, err = call(["--text", f"bn={data / 'bn.txt'}", "--tokenizer", "gpt2", "--out", str(run), "--overwrite"],
                     capsys)
    input_error(code, err, "--out", "pretrain launch")
    assert keep.unchanged() and sorted(run.rglob("*")) == before


def test_out_a_symlink_to_an_empty_folder_is_filled_at_its_target(data, tmp_path, capsys):
    """The user's link is never renamed or replaced (it was renamed to .LINK.old-PID, replaced by a folder, and
    the command ended in a traceback)."""
    target = tmp_path / "volume" / "report"
    target.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--out", str(link)], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target) and (target / "report.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "link", "volume"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["report"]


@pytest.mark.parametrize("read_only", [False, True])
def test_out_a_mount_point_is_refused_before_any_work(read_only, data, tmp_path, capsys, monkeypatch, mount_point,
                                                      input_error):
    import fertility.analysis

    out = mount_point("volume", read_only=read_only)
    monkeypatch.setattr(fertility.analysis, "prepare_batch",
                        lambda *a: pytest.fail("the analysis started before --out was checked"))
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--out", str(out)], capsys)
    input_error(code, err, str(out), "mount point")
    assert not any(out.iterdir())


def test_a_rename_refused_with_ebusy_is_one_line_and_keeps_the_report(data, tmp_path, capsys, busy_rename,
                                                                     input_error):
    out = tmp_path / "out"
    busy_rename(out)
    code, err = call(["--tokenizer", "gpt2", "--text", f"bn={data / 'bn.txt'}", "--out", str(out)], capsys)
    input_error(code, err, str(out), "busy", "kept in")
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert not out.exists() and len(kept) == 1 and (kept[0] / "report.json").is_file()
