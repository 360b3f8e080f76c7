"""The command end to end on small slices of the sample; its bad-input cases are in test_contract.py."""

import json

import pytest

from common.outdir import MARKER
from fertility.tokenizers import load_tokenizer
from tokenizers_train.cli import main


def _args(small_texts, out, *extra):
    return ["--text", f"bn={small_texts['bn']}", "--text", f"en={small_texts['en']}", "--out", str(out),
            "--no-progress", "--max-validation-chars", "20000", "--holdout", "0.1", *extra]


@pytest.mark.slow
def test_train_with_naive_writes_tokenizer_reports_and_flags_the_trap(small_texts, tmp_path, capsys):
    out = tmp_path / "tok"
    assert main(_args(small_texts, out, "--vocab-size", "1024", "--naive", "--reference", "gpt2")) == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "fertility", "naive", "tokenizer.json", "tokenizer_config.json",
                                                     "training_report.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left beside OUT
    report = json.loads((out / "training_report.json").read_text())
    assert report["arguments"]["train"]["vocab_size"] == 1024 and len(report["data"]["sha256"]) == 64
    # the default balances the languages: two probe rounds on a small sample, then full rounds until the
    # validation chars/token are within 1.05 of each other
    rounds = report["rounds"]
    assert [r["probe"] for r in rounds[:3]] == [True, True, False] and set(rounds[0]["chars_per_token"]) == {"bn", "en"}
    assert rounds[0]["shares"] == {"bn": 0.5, "en": 0.5} and rounds[0]["sample_chars"] < rounds[2]["sample_chars"]
    chosen = rounds[report["chosen_round"] - 1]
    assert chosen["met"] and not chosen["probe"]
    cpt = chosen["chars_per_token"]
    assert max(cpt.values()) / min(cpt.values()) <= 1.05
    # shares are in characters: the sample gives each language its share of the characters
    sample = report["data"]["sample_chars"]
    assert sample["bn"] / sample["en"] == pytest.approx(chosen["shares"]["bn"] / chosen["shares"]["en"], rel=1e-4)
    comparison = report["comparison"]
    # the tokenizer is named after OUT, as loading OUT/tokenizer.json names it in every later report
    assert report["tokenizer"]["name"] == "tok" and set(comparison) == {"tok", "naive-gpt2-bpe", "gpt2"}
    ours, naive = comparison["tok"], comparison["naive-gpt2-bpe"]
    assert ours["chars_per_token"]["bn"] > 1.2 * naive["chars_per_token"]["bn"]
    assert naive["chars_per_token"]["bn"] <= 1.5
    # the naive pre-tokenizer caps Bangla whatever the vocabulary; ours does not
    assert any(t["script"] == "Bengali" and t["rule"] == "low_pretoken_ceiling" for t in naive["traps"])
    assert not any(t["rule"] == "low_pretoken_ceiling" for t in ours["traps"])
    fert = json.loads((out / "fertility" / "report.json").read_text())
    assert [t["name"] for t in fert["tokenizers"]] == ["tok", "naive-gpt2-bpe", "gpt2"]
    assert load_tokenizer(str(out / "tokenizer.json")).name == load_tokenizer(str(out)).name == "tok"
    assert "naive-gpt2-bpe" in capsys.readouterr().out
    # an existing OUT is never replaced without --overwrite
    assert main(_args(small_texts, out, "--vocab-size", "1024")) == 2
    assert (out / "naive").is_dir()
    # with --overwrite the new run replaces it whole, once it has succeeded
    assert main(_args(small_texts, out, "--vocab-size", "512", "--phrase-fraction", "0", "--whole-graphemes", "off", "--overwrite")) == 0
    assert not (out / "naive").exists()
    assert json.loads((out / "training_report.json").read_text())["tokenizer"]["vocab_size"] == 512
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]


def test_unreachable_target_reports_rounds_and_writes_nothing(small_texts, tmp_path, capsys):
    out = tmp_path / "tok"
    code = main(_args(small_texts, out, "--vocab-size", "512", "--phrase-fraction", "0", "--whole-graphemes", "off", "--target", "bn=40,en=40",
                      "--max-rounds", "2"))
    err = capsys.readouterr().err
    assert code == 3
    assert "target not met after 2 rounds" in err and "round" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_scarce_language_is_capped_and_the_report_says_so(small_texts, tmp_path, capsys):
    """A third language with ~3,000 characters asked for a 10% share of 100,000: capped, in the report and in
    the printed summary; with --max-repeats it is cycled instead, and that is said too."""
    scarce = tmp_path / "lo.txt"
    lines = small_texts["en"].read_text(encoding="utf-8").splitlines()
    scarce.write_text("\n".join(lines[:20]) + "\n", encoding="utf-8")
    base = [*_args(small_texts, tmp_path / "a"), "--text", f"lo={scarce}", "--vocab-size", "512",
            "--phrase-fraction", "0", "--whole-graphemes", "off", "--shares", "bn=0.45,en=0.45,lo=0.1",
            "--sample-chars", "100000"]
    assert main(base) == 0
    report = json.loads((tmp_path / "a" / "training_report.json").read_text())
    lo = report["data"]["languages"]["lo"]
    assert lo["text_chars"] < 10_000 and lo["sample_chars"] == lo["text_chars"] and lo["repeats"] == 1
    assert lo["share"] < 0.1 and lo["asked_share"] == pytest.approx(0.1)
    assert report["data"]["notes"] == [lo["note"]] and lo["note"].startswith("lo: capped at")
    assert report["data"]["sample_chars"]["lo"] == lo["sample_chars"]
    out = capsys.readouterr()
    assert f"note: {lo['note']}" in out.out and f"{lo['text_chars']:,}" in out.out
    assert (out.out + out.err).count(lo["note"]) == 1  # said once with --no-progress (the summary)
    base[base.index(str(tmp_path / "a"))] = str(tmp_path / "b")
    assert main([*base, "--max-repeats", "10"]) == 0
    lo = json.loads((tmp_path / "b" / "training_report.json").read_text())["data"]["languages"]["lo"]
    assert lo["sample_chars"] >= 10_000 > lo["text_chars"] and "cycled" in lo["note"]


def test_a_sample_too_small_for_the_vocabulary_says_how_much_is_padding(small_texts, tmp_path, capsys):
    """The finding: a tiny --sample-chars trained without a word. Under --vocab-size it is refused (see
    test_contract.py); above it, whatever the trainer could not learn is padding, and one line says how much."""
    out = tmp_path / "tok"
    # short lines, so that the 1,100 characters asked for are about all the sample holds (a whole long
    # document would be drawn in full and fill the vocabulary)
    short = {}
    for lang, path in small_texts.items():
        short[lang] = tmp_path / f"{lang}.txt"
        short[lang].write_text("".join(line[:60] + "\n" for line in path.read_text(encoding="utf-8").splitlines()),
                               encoding="utf-8")
    assert main(_args(short, out, "--vocab-size", "1024", "--sample-chars", "1100", "--shares", "bn=0.5,en=0.5",
                      "--phrase-fraction", "0", "--whole-graphemes", "off")) == 0
    tok = json.loads((out / "tokenizer.json").read_text())
    padding = [t["content"] for t in tok["added_tokens"] if t["content"].startswith("<|reserved_")][5:]
    assert len(padding) > 100
    warning, = [line for line in capsys.readouterr().err.splitlines() if "padding" in line]
    assert warning.startswith("warning: ") and f"{1024 - len(padding):,} of the 1,024 tokens" in warning
    assert f"{len(padding):,}" in warning and "--sample-chars" in warning


def test_one_language_gets_no_note_about_other_languages(small_texts, tmp_path, capsys):
    """The finding: a one-language run printed "the other languages use only part of their text"."""
    out = tmp_path / "tok"
    args = ["--text", f"bn={small_texts['bn']}", "--out", str(out), "--no-progress", "--vocab-size", "512",
            "--phrase-fraction", "0", "--whole-graphemes", "off", "--holdout", "0.1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "other languages" not in captured.out + captured.err
    assert json.loads((out / "training_report.json").read_text())["data"]["notes"] == []
