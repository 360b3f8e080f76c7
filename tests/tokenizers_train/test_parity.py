"""``--parity``/balance on a line-aligned parallel dev set, for seven languages at once (issue 29).

Seven "languages" are the sample's English in seven scripts, one letter for a letter (``hi`` writes each
letter as two), lower-cased except English: at equal shares their premiums against English differ by more
than the tolerance, and parity on the parallel set must bring every one of them within it."""

import gzip
import json

import pytest

from fertility.premium import premium, read_parallel
from fertility.tokenizers import load_tokenizer
from tokenizers_train.cli import main

# letters of seven scripts (contiguous blocks of 26 or more letters); hi doubles each letter
SCRIPTS = {"en": None, "hi": 0x0915, "ru": 0x0430, "hy": 0x0561, "ka": 0x10D0, "he": 0x05D0, "th": 0x0E01}


def _write(text: str, lang: str) -> str:
    base = SCRIPTS[lang]
    if base is None:
        return text
    table = {ord("a") + i: chr(base + i) * (2 if lang == "hi" else 1) for i in range(26)}
    return text.lower().translate(table)


@pytest.fixture(scope="module")
def seven(small_texts, sample_dir, tmp_path_factory):
    """Training text and a FLORES-style dev folder (devtest/LANG.devtest) for the seven languages."""
    root = tmp_path_factory.mktemp("seven")
    english = small_texts["en"].read_text(encoding="utf-8")
    with gzip.open(sample_dir / "parallel" / "eng_Latn.txt.gz", "rt", encoding="utf-8") as f:
        dev = [next(f).rstrip("\n") for _ in range(300)]
    (root / "flores" / "devtest").mkdir(parents=True)
    texts = []
    for lang in SCRIPTS:
        (root / f"{lang}.txt").write_text(_write(english, lang), encoding="utf-8")
        (root / "flores" / "devtest" / f"{lang}.devtest").write_text("\n".join(_write(s, lang) for s in dev) + "\n",
                                                                      encoding="utf-8")
        texts += ["--text", f"{lang}={root / f'{lang}.txt'}"]
    return root, texts


@pytest.mark.slow
def test_parity_on_a_flores_folder_balances_seven_languages_at_once(seven, tmp_path):
    root, texts = seven
    out = tmp_path / "tok"
    assert main([*texts, "--out", str(out), "--no-progress", "--vocab-size", "2048", "--holdout", "0.1",
                 "--max-validation-chars", "20000", "--flores", str(root / "flores"), "--parity", "en",
                 "--tolerance", "1.1", "--probe-chars", "100000"]) == 0
    report = json.loads((out / "training_report.json").read_text())
    chosen = report["rounds"][report["chosen_round"] - 1]
    assert chosen["met"] and not chosen["probe"]
    assert set(report["arguments"]["parallel"]) == set(SCRIPTS)  # in the resume key: another dev set, new rounds
    # the rounds were judged on the dev set: each language's figure is English's characters per its token
    dev = read_parallel({k: root / "flores" / "devtest" / f"{k}.devtest" for k in SCRIPTS})
    got = premium(load_tokenizer(str(out / "tokenizer.json")), dev, "en")
    for lang, m in got.items():
        assert chosen["chars_per_token"][lang] == pytest.approx(got["en"].chars / m.tokens)
        assert m.premium <= 1.1, {k: v.premium for k, v in got.items()}  # parity: none costs more than 1.1x
    # at equal shares some premium was past the tolerance: the rounds moved the shares to meet it
    first = report["rounds"][0]
    assert max(first["chars_per_token"]["en"] / v for v in first["chars_per_token"].values()) > 1.1
    assert chosen["shares"] != first["shares"]
    # the per-source table: every source's part of the validation slice, measured
    assert {row["lang"] for row in report["by_source"]} == set(SCRIPTS)
    assert all(row["chars_per_token"]["tok"] > 0 for row in report["by_source"])


def test_a_dev_set_without_every_language_is_refused_before_any_work(seven, tmp_path, capsys):
    root, texts = seven
    args = [*texts, "--out", str(tmp_path / "tok"), "--no-progress", "--parallel", f"en={root / 'flores/devtest/en.devtest'}",
            "--parallel", f"hi={root / 'flores/devtest/hi.devtest'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the parallel dev set has no he, hy, ka, ru, th" in err[0]
    assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize("extra, expected", [
    (["--flores", "FLORES", "--parallel", "en=EN"], "--flores and --parallel"),
    (["--flores", "MISSING"], "no devtest/*.devtest files"),
])
def test_a_bad_dev_set_option_is_one_line_and_exit_2(seven, tmp_path, capsys, extra, expected):
    root, texts = seven
    extra = [str(root / "flores") if x == "FLORES" else str(tmp_path / "none") if x == "MISSING" else
             f"en={root / 'flores/devtest/en.devtest'}" if x == "en=EN" else x for x in extra]
    assert main([*texts, "--out", str(tmp_path / "tok"), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "tok").exists()


def test_a_changed_dev_file_is_another_run_to_resume(tmp_path):
    """Rounds measured on a dev set are not resumed once its file changed at the same path (the resume key held
    only the --text files' sizes and times)."""
    import os

    from fertility.text import TextSource
    from tokenizers_train.run import TrainingRun, _resume_key

    text, dev = tmp_path / "bn.txt", tmp_path / "bn.dev"
    text.write_text("আমি\n", encoding="utf-8")
    dev.write_text("আমি\n", encoding="utf-8")
    config = TrainingRun(texts=[TextSource("bn", str(text))], out=tmp_path / "tok",
                         parallel={"bn": TextSource("bn", str(dev))})
    before = _resume_key(config)
    dev.write_text("তুমি আর আমি\n", encoding="utf-8")
    os.utime(dev, ns=(1, 1))
    assert _resume_key(config) != before
