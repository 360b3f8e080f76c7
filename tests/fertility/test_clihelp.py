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
