"""fertility.clihelp: plain help text and shown defaults, the same for every command."""

from __future__ import annotations

from fertility.clihelp import parser, plain


def test_plain_strips_rest_markup():
    assert plain("see :func:`pretrain.step.lr_at` and ``--resume`` in `pretrain.rundir`") == (
        "see pretrain.step.lr_at and --resume in pretrain.rundir")


def test_defaults_are_shown_but_not_none():
    p = parser("demo", "Does ``x``.")
    p.add_argument("--steps", type=int, default=10, help="how many")
    p.add_argument("--out", help="where")
    text = p.format_help()
    assert "Does x." in text and "how many (default: 10)" in text
    assert "where (default" not in text


def test_one_metavar_convention_and_no_second_default():
    p = parser("demo")
    p.add_argument("--steps", type=int, default=3, help="how many (default 3)")
    p.add_argument("--rate", type=float, help="how fast")
    text = p.format_help()
    assert "--steps N" in text and "--rate X" in text
    assert "(default 3)" in text and "(default: 3)" not in text
