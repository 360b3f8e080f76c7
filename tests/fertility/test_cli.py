"""The CLI end to end: a real report on the shipped sample, and every bad input (exit 2, nothing written)."""

import gzip
import json
import subprocess
import sys

import pytest

from common.outdir import MARKER
from fertility.cli import main


@pytest.fixture
def texts(sample_dir):
    return ["--text", f"bn={sample_dir / 'bn' / 'literature-bnarchive.txt.gz'}",
            "--text", f"en={sample_dir / 'en' / 'wiki-en-chinapedia.txt.gz'}"]


@pytest.fixture
def parallel(sample_dir):
    return ["--parallel", f"bn={sample_dir / 'parallel' / 'ben_Beng.txt.gz'}",
            "--parallel", f"en={sample_dir / 'parallel' / 'eng_Latn.txt.gz'}"]


def run(args, capsys):
    try:
        code = main(["report", "--no-progress", *args])
    except SystemExit as stop:  # refused while parsing (argparse exits with the contract's one line)
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_report_on_the_sample(tmp_path, texts, parallel, capsys, shipped_tokenizers):
    out = tmp_path / "rep"
    code, stdout, _ = run(["--tokenizer", "gpt2", "--tokenizer", "o200k_base", "--tokenizer-dir", str(shipped_tokenizers), *texts,
                           *parallel, "--max-chars", "20000", "--out", str(out)], capsys)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "report.html", "report.json", "report.md"]
    report = json.loads((out / "report.json").read_text())
    assert report["schema_version"] == 1
    gpt2, o200k = report["tokenizers"]
    assert (gpt2["name"], gpt2["kind"], o200k["kind"]) == ("gpt2", "hf", "tiktoken")
    for tok in report["tokenizers"]:
        for key in ("chars_per_token", "graphemes_per_token", "bytes_per_token", "tokens_per_word",
                    "continued_word_rate", "broken_grapheme_rate", "unk_rate", "byte_fallback_rate",
                    "vocab_types_used", "pretoken_ceiling"):
            assert key in tok["languages"]["bn"] and key in tok["scripts"]["Bengali"]
        assert tok["parallel"]["en"]["premium"] == 1.0 and tok["parallel"]["bn"]["premium"] > 1.0
        assert set(tok["balance"]["token_share"]) == {"bn", "en"}
    assert gpt2["languages"]["bn"]["chars_per_token"] < 1 < o200k["languages"]["bn"]["chars_per_token"]
    assert any(t["script"] == "Bengali" and "combining marks" in t["cause"] for t in gpt2["traps"])
    assert "gpt2" in stdout and "TRAP gpt2 / Bengali" in stdout
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4
    assert "| bn |" in (out / "report.md").read_text()
    # a second run replaces the report whole
    code, _, err = run(["--tokenizer", "gpt2", *texts, "--max-chars", "5000", "--out", str(out)], capsys)
    assert code == 2 and "--overwrite" in err  # an existing report is replaced only when asked
    code, _, _ = run(["--tokenizer", "gpt2", *texts, "--max-chars", "5000", "--out", str(out), "--overwrite"], capsys)
    assert code == 0 and len(json.loads((out / "report.json").read_text())["tokenizers"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def bad_inputs(tmp_path, sample_dir):
    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes("ভালো\n".encode() + b"caf\xe9\n")
    truncated = tmp_path / "cut.txt.gz"
    data = gzip.compress(("বাংলা লেখা\n" * 100).encode())
    truncated.write_bytes(data[: len(data) // 2])
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    short = tmp_path / "short.txt"
    short.write_text("one\ntwo\n")
    corrupt = tmp_path / "broken.tiktoken"
    corrupt.write_text("this is not a ranks file\n")
    en = f"en={sample_dir / 'en' / 'wiki-en-chinapedia.txt.gz'}"
    return {
        "missing file": (["--text", f"bn={tmp_path / 'nope.txt'}"], "nope.txt: no such file"),
        "non-UTF-8": (["--text", f"bn={bad_utf8}"], "latin1.txt:2: not valid UTF-8"),
        "truncated gzip": (["--text", f"bn={truncated}"], "cut.txt.gz:"),
        "empty file": (["--text", f"bn={empty}"], "empty.txt: no documents"),
        "misaligned parallel": (["--text", en, "--parallel", f"bn={sample_dir / 'parallel' / 'ben_Beng.txt.gz'}",
                                 "--parallel", f"en={short}"], "short.txt has 2"),
        "unknown tokenizer": (["--text", en, "--tokenizer", "gpt7"], "unknown tokenizer name 'gpt7'"),
        "corrupt tokenizer": (["--text", en, "--tokenizer", str(corrupt)], "broken.tiktoken:1"),
    }


@pytest.mark.parametrize("case", ["missing file", "non-UTF-8", "truncated gzip", "empty file", "misaligned parallel",
                                  "unknown tokenizer", "corrupt tokenizer"])
def test_bad_input_exits_nonzero_and_writes_nothing(tmp_path, sample_dir, capsys, case):
    work = tmp_path / "work"
    work.mkdir()
    args, expected = bad_inputs(work, sample_dir)[case]
    if "--tokenizer" not in args:
        args = ["--tokenizer", "gpt2", *args]
    out = tmp_path / "out" / "rep"
    out.parent.mkdir()
    code, _, err = run([*args, "--max-chars", "3000", "--out", str(out)], capsys)
    assert code == 2
    assert expected in err
    assert list(out.parent.iterdir()) == []  # no report, no temp folder


def test_failure_keeps_the_previous_report(tmp_path, sample_dir, capsys):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.json").write_text('{"previous": true}')
    code, _, _ = run(["--tokenizer", "gpt2", "--text", f"bn={tmp_path / 'missing.txt'}", "--out", str(out)], capsys)
    assert code == 2 and json.loads((out / "report.json").read_text()) == {"previous": True}


@pytest.mark.slow
def test_python_dash_m(tmp_path, sample_dir):
    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-m", "fertility", "report", "--tokenizer", "nope", "--text",
                           f"bn={sample_dir / 'parallel' / 'ben_Beng.txt.gz'}", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown tokenizer name 'nope'" in proc.stderr
    assert not out.exists()


def test_input_error_classes_share_one_base():
    from fertility import InputError, TextError, TokenizerLoadError
    from fertility.premium import ParallelError

    for cls in (TextError, TokenizerLoadError, ParallelError):
        assert issubclass(cls, InputError) and issubclass(cls, ValueError)


def test_same_tokenizer_twice_is_an_input_error(tmp_path, texts, capsys):
    out = tmp_path / "rep"
    code, _, err = run(["--tokenizer", "gpt2", "--tokenizer", "gpt2", *texts, "--max-chars", "2000",
                        "--out", str(out)], capsys)
    assert code == 2 and "two tokenizers share a name" in err and not out.exists()


def test_a_bug_keeps_its_traceback(tmp_path, texts, capsys, monkeypatch):
    import fertility.cli

    def broken(*args, **kwargs):
        raise ValueError("a bug inside the analysis")

    monkeypatch.setattr(fertility.cli, "analyze", broken)
    with pytest.raises(ValueError, match="a bug inside the analysis"):
        run(["--tokenizer", "gpt2", *texts, "--out", str(tmp_path / "rep")], capsys)
    assert not (tmp_path / "rep").exists()


def test_out_naming_a_file_is_refused_before_any_work(tmp_path, texts, capsys, monkeypatch):
    import fertility.cli

    monkeypatch.setattr(fertility.cli, "analyze", lambda *a, **k: pytest.fail("analysis ran before --out was checked"))
    out = tmp_path / "notes.txt"
    out.write_text("the user's file")
    code, _, err = run(["--tokenizer", "gpt2", *texts, "--out", str(out)], capsys)
    assert code == 2 and "is not a folder" in err and "notes.txt" in err
    assert out.read_text() == "the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing renamed, nothing staged


def test_every_text_is_checked_before_any_work(tmp_path, sample_dir, capsys, monkeypatch):
    import fertility.analysis

    batches = []
    real = fertility.analysis.prepare_batch
    monkeypatch.setattr(fertility.analysis, "prepare_batch", lambda docs: batches.append(len(docs)) or real(docs))
    args = ["--tokenizer", "gpt2", "--text", f"en={sample_dir / 'en' / 'wiki-en-chinapedia.txt.gz'}",
            "--text", f"bn={tmp_path / 'second-missing.txt'}", "--out", str(tmp_path / "rep")]
    code, _, err = run(args, capsys)
    assert code == 2 and "second-missing.txt: no such file" in err
    assert batches == []  # the first text was not analysed first


def test_parallel_files_alone_are_text(tmp_path, sample_dir, parallel, capsys):
    out = tmp_path / "rep"
    code, _, err = run(["--tokenizer", "gpt2", *parallel, "--max-chars", "3000", "--out", str(out)], capsys)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert sorted(t["lang"] for t in report["texts"]) == ["bn", "en"]
    tok = report["tokenizers"][0]
    assert tok["languages"]["bn"]["chars"] > 0 and tok["parallel"]["bn"]["premium"] > 1


def test_no_text_at_all_is_an_input_error(tmp_path, capsys):
    code, _, err = run(["--tokenizer", "gpt2", "--out", str(tmp_path / "rep")], capsys)
    assert code == 2 and "no text" in err


def test_non_utf8_names_the_character_column_and_a_cli_way_out(tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ভালো ক\n".encode() + "ভালো caf".encode() + b"\xe9\n")
    out = tmp_path / "rep"
    code, _, err = run(["--tokenizer", "gpt2", "--text", f"bn={bad}", "--out", str(out)], capsys)
    # ভ া ল ো, a space, c a f: the bad byte is the 9th character (byte 17)
    assert code == 2 and "latin1.txt:2:" in err and "at character 9" in err and "--skip-bad-utf8" in err
    code, _, err = run(["--tokenizer", "gpt2", "--text", f"bn={bad}", "--skip-bad-utf8", "--out", str(out)], capsys)
    assert code == 0, err
    assert json.loads((out / "report.json").read_text())["texts"][0]["bad_utf8"] == 1


def fake_flores(root, sample_dir):
    """A FLORES-200 shaped folder: the shipped bn/en parallel sample, and a third language (the English lines
    upper-cased) under FLORES codes, in devtest/ and dev/."""
    bn = gzip.decompress((sample_dir / "parallel" / "ben_Beng.txt.gz").read_bytes()).decode().splitlines()[:40]
    en = gzip.decompress((sample_dir / "parallel" / "eng_Latn.txt.gz").read_bytes()).decode().splitlines()[:40]
    for split in ("dev", "devtest"):
        (root / split).mkdir(parents=True)
        for code, lines in (("ben_Beng", bn), ("eng_Latn", en), ("xxx_Latn", [x.upper() for x in en])):
            (root / split / f"{code}.{split}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_flores_folder_reports_every_language_against_english(tmp_path, sample_dir, capsys):
    flores = fake_flores(tmp_path / "flores200_dataset", sample_dir)
    out = tmp_path / "rep"
    code, stdout, err = run(["--tokenizer", "gpt2", "--flores", str(flores), "--out", str(out)], capsys)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["reference"] == "eng_Latn"
    par = report["tokenizers"][0]["parallel"]
    assert sorted(par) == ["ben_Beng", "eng_Latn", "xxx_Latn"] and par["eng_Latn"]["premium"] == 1.0
    assert par["ben_Beng"]["premium"] > 2 and par["xxx_Latn"]["premium"] > 1
    assert sorted(report["tokenizers"][0]["languages"]) == ["ben_Beng", "eng_Latn", "xxx_Latn"]
    assert "ben_Beng premium" in (out / "report.md").read_text()


def test_flores_errors_come_before_any_work(tmp_path, sample_dir, capsys):
    code, _, err = run(["--tokenizer", "gpt2", "--flores", str(tmp_path / "nope"), "--out", str(tmp_path / "r")],
                       capsys)
    assert code == 2 and "no devtest/*.devtest files" in err
    flores = fake_flores(tmp_path / "f", sample_dir)
    code, _, err = run(["--tokenizer", "gpt2", "--flores", str(flores), "--reference", "en",
                        "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "reference language 'en' is not among" in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["missing", "a file"])
def test_a_tokenizer_dir_that_is_not_a_folder_is_refused(tmp_path, texts, capsys, input_error, where):
    folder = tmp_path / "tokenizers"
    if where == "a file":
        folder.write_text("not a folder")
    out = tmp_path / "rep"
    code, _, err = run(["--tokenizer", "gpt2", *texts, "--max-chars", "2000", "--tokenizer-dir", str(folder),
                        "--out", str(out)], capsys)
    input_error(code, err, "--tokenizer-dir", str(folder))
    assert not out.exists()


def test_the_same_file_twice_under_one_label_is_refused(tmp_path, sample_dir, capsys, input_error):
    path = sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"
    link = tmp_path / "same.txt.gz"
    link.symlink_to(path)
    out = tmp_path / "rep"
    code, _, err = run(["--tokenizer", "gpt2", "--text", f"bn={path}", "--text", f"bn={link}",
                        "--max-chars", "2000", "--out", str(out)], capsys)
    input_error(code, err, "bn", "same.txt.gz", "twice")
    assert not out.exists()
    # the same file under two labels is two measurements, as asked
    code, _, err = run(["--tokenizer", "gpt2", "--text", f"bn={path}", "--text", f"as={link}",
                        "--max-chars", "2000", "--out", str(out)], capsys)
    assert code == 0, err
