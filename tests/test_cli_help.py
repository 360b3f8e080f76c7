"""Every command's --help reads the same way: plain text (no reST markup), defaults shown, one metavar style."""

from __future__ import annotations

import pytest

from corpus.cli import main as corpus_main
from fertility.cli import main as fertility_main
from pretrain.cli import main as pretrain_main
from tokenizers_train.cli import main as train_main

COMMANDS = [
    (fertility_main, ["--help"]), (fertility_main, ["report", "--help"]),
    (train_main, ["--help"]),
    (corpus_main, ["--help"]), (corpus_main, ["build", "--help"]), (corpus_main, ["plan", "--help"]),
    (corpus_main, ["inspect", "--help"]),
    (pretrain_main, ["--help"]), (pretrain_main, ["launch", "--help"]), (pretrain_main, ["eval", "--help"]),
    (pretrain_main, ["bench", "--help"]), (pretrain_main, ["export", "--help"]),
]


@pytest.mark.parametrize(("main", "argv"), COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_is_plain_with_one_metavar_style(main, argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    assert "``" not in out and ":func:" not in out and ":class:" not in out
    assert "(default: None)" not in out and "(default: False)" not in out
    for token in ("MAX_STEPS", "TIME_BUDGET_S", "MICRO_BATCH", "MIN_CHARS", "VOCAB_SIZE"):
        assert token not in out, token  # counts are N, numbers X
