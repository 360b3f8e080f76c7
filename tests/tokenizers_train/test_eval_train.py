"""benchmarks/eval_train.py: the held-out acceptance check a user (or the team, on its hidden set) runs on a
line-aligned parallel set."""

from __future__ import annotations

import gzip
import runpy
from pathlib import Path

import pytest

EVAL = Path(__file__).resolve().parents[2] / "benchmarks" / "eval_train.py"
BN = ["আমি বাংলায় গান গাই।", "কৃষ্ণ র‍্যাব উৎসব দেখতে গেল।", "ভালো আছি, ধন্যবাদ।"]
EN = ["I sing in Bangla.", "Krishna went to see the RAB festival.", "I am well, thank you."]


@pytest.fixture(scope="module")
def eval_train():
    return runpy.run_path(str(EVAL))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(BN + EN, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path, tok


def test_parallel_set_figures_and_verdict(eval_train, tokenizer, tmp_path, capsys):
    path, tok = tokenizer
    (tmp_path / "news.bn.txt.gz").write_bytes(gzip.compress(("\n".join(BN) + "\n").encode()))
    (tmp_path / "news.en.txt").write_text("\n".join(EN) + "\n", encoding="utf-8")
    eval_train["main"](["--parallel", str(tmp_path / "news.bn.txt.gz"), str(tmp_path / "news.en.txt"), str(path)])
    row = capsys.readouterr().out.strip().splitlines()[-1].split(" | ")
    bn_tokens = sum(len(tok.encode(x, add_special_tokens=False).ids) for x in BN)
    en_tokens = sum(len(tok.encode(x, add_special_tokens=False).ids) for x in EN)
    assert row[2] == "3"
    assert float(row[3]) == pytest.approx(sum(map(len, BN)) / bn_tokens, abs=1e-3)
    assert float(row[4]) == pytest.approx(sum(map(len, EN)) / en_tokens, abs=1e-3)
    assert float(row[5]) == pytest.approx(bn_tokens / en_tokens, abs=1e-3)
    # a 300-token byte-level BPE is far from the goal, and the verdict says on what
    assert "bn " in row[7] and "< 5.0" in row[7]


def test_misaligned_parallel_files_are_refused_naming_them(eval_train, tokenizer, tmp_path):
    (tmp_path / "a.bn.txt").write_text("\n".join(BN) + "\n", encoding="utf-8")
    (tmp_path / "a.en.txt").write_text("\n".join(EN[:2]) + "\n", encoding="utf-8")
    # the project's one parallel reader (fertility.premium.read_parallel) refuses them, naming both files
    with pytest.raises(SystemExit, match=r"a\.bn\.txt .*a\.en\.txt: .*not line-aligned.* 3 non-blank lines.* has 2"):
        eval_train["main"](["--parallel", str(tmp_path / "a.bn.txt"), str(tmp_path / "a.en.txt"), str(tokenizer[0])])


@pytest.mark.parametrize("figures, failing", [
    ((5.1, 4.9, 1.0, 0.001), []),
    ((4.9, 4.9, 1.0, 0.001), ["bn"]),
    ((5.1, 4.7, 1.0, 0.001), ["en"]),
    ((5.1, 4.9, 0.94, 0.001), ["premium"]),
    ((5.1, 4.9, 1.06, 0.001), ["premium"]),
    ((5.1, 4.9, 1.0, 0.03), ["mark-start"]),
])
def test_acceptance_bounds(eval_train, figures, failing):
    got = eval_train["ParallelFigures"](*figures).failures(eval_train["Acceptance"]())
    assert [why.split(" ")[0] for why in got] == failing
