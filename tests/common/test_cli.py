"""common.cli: the help format, and the command-line contract every command follows (one-line errors,
number and label types, the one LANG=NUMBER parser, the top-level handler's exit codes, signals)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from common import cli
from common.cli import parser, plain
from common.errors import InputError
from common.signals import Interrupted, deferred_signals


def test_plain_strips_rest_markup():
    assert plain("see :func:`pretrain.train.optim.lr_at` and ``--resume`` in `pretrain.train.rundir`") == (
        "see pretrain.train.optim.lr_at and --resume in pretrain.train.rundir")


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


def test_a_parse_error_is_one_line_and_exit_2(capsys):
    p = parser("demo")
    p.add_argument("--steps", type=cli.positive_int, default=3)
    p.add_argument("--holdout", type=cli.fraction, default=0.1)
    p.add_argument("--lang", type=cli.label)
    for argv, expected in [(["--steps", "-5"], "--steps: expected a positive integer, got -5"),
                           (["--steps", "2.5"], "--steps: expected a positive integer, got '2.5'"),
                           (["--holdout", "1"], "--holdout: expected a fraction"),
                           (["--holdout", "nan"], "--holdout: expected a fraction"),
                           (["--lang", "../x"], "--lang: label '../x'"),
                           (["--nope"], "unrecognized arguments: --nope")]:
        with pytest.raises(SystemExit) as e:
            p.parse_args(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and expected in err, (argv, err)
    assert p.parse_args(["--steps", "2e3", "--lang", "ben_Beng"]).steps == 2000
    assert "--steps N" in p.format_help() and "--holdout X" in p.format_help()


@pytest.mark.parametrize("good", ["bn", "ben_Beng", "bn-IN", "x1", "বাংলা", "हिन्दी", "bn_বাংলা"])
def test_labels_that_pass(good):
    assert cli.check_label(good) == good


@pytest.mark.parametrize("bad", ["", "../victim", "b/n", "a b", "1bn", ".", "bn\n", "x" * 65, "বাংলা/x", "বা..ং",
                                 "১bn", "\u09bebn", "b\\n", "bn\u200d", "bn:x"])
def test_a_label_is_never_a_path(bad):
    with pytest.raises(InputError, match="expected letters"):
        cli.check_label(bad)


def test_the_one_lang_number_parser():
    assert cli.parse_lang_numbers(" bn = 0.7 , en=0.3 ,", option="--mix") == {"bn": 0.7, "en": 0.3}
    assert cli.parse_lang_numbers("bn=0", option="--mix") == {"bn": 0.0}
    for spec, message in [("bn", "expected LANG=NUMBER"), ("bn=x", "not a number"), ("bn=1,bn=2", "twice"),
                          ("bn=-1", ">= 0"), ("", "expected"), ("../a=1", "label"), ("bn=inf", "not a number")]:
        with pytest.raises(InputError, match=message) as e:
            cli.parse_lang_numbers(spec, option="--mix")
        assert str(e.value).startswith("--mix")
    with pytest.raises(InputError, match="> 0"):
        cli.parse_lang_numbers("bn=0", option="--target", strict=True)


_HEADER = """import sys, pathlib, time
from common import cli
from common.errors import InputError
def build():
    p = cli.parser("demo")
    p.add_argument("--n", type=cli.positive_int, default=1)
    return p
def run(args):
"""


def _argv(body: str) -> list[str]:
    """A command whose ``run`` is ``body`` (statements), under the one top-level handler."""
    code = _HEADER + textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return [sys.executable, "-c", code + '\nsys.exit(cli.run_command("demo", build, run, sys.argv[1:]))\n']


def _command(body: str, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(body) + argv, capture_output=True, text=True, timeout=60)


def test_the_top_level_handler_exit_codes():
    ok = _command("return 0", [])
    assert ok.returncode == 0 and ok.stderr == ""
    bad = _command("raise InputError('x.txt:3: field text: expected a string\\nsecond line')", [])
    assert bad.returncode == 2 and bad.stderr == "demo: error: x.txt:3: field text: expected a string; second line\n"
    missing = _command("open('/nonexistent/bn.txt')", [])
    assert missing.returncode == 2 and missing.stderr.startswith("demo: error: /nonexistent/bn.txt: ")
    assert missing.stderr.count("\n") == 1
    parse = _command("return 0", ["--n", "0"])
    assert parse.returncode == 2 and parse.stderr.count("\n") == 1 and "--n" in parse.stderr
    bug = _command("raise RuntimeError('a bug')", [])
    assert bug.returncode == 1 and "Traceback" in bug.stderr  # a bug keeps its traceback


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_one_line_and_128_plus_its_number(tmp_path, sig):
    ready = tmp_path / "ready"
    proc = subprocess.Popen(_argv(f"""
        pathlib.Path({str(ready)!r}).write_text("x")
        while True:
            time.sleep(0.05)
        """), stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert err == f"demo: stopped by {signal.Signals(sig).name}; finished work is kept (rerun the same command to go on)\n"


def _wait_for(path, proc):
    # Synchronise on a file the child writes, never on time: the loop ends when the file appears or the child dies.
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        os.sched_yield()


def test_deferred_signals_wait_for_the_safe_point():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with deferred_signals() as stop:
        assert not stop
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signum == signal.SIGTERM  # recorded, nothing raised
        with pytest.raises(Interrupted) as e:
            os.kill(os.getpid(), signal.SIGINT)  # a second signal means now
        assert e.value.exit_code == 130
    assert {sig: signal.getsignal(sig) for sig in before} == before  # the handlers are put back


@pytest.mark.parametrize("module", ["fertility.cli", "tokenizers_train.cli", "corpus.cli", "pretrain.cli"])
def test_every_command_says_its_version(module, capsys):
    import importlib
    from importlib.metadata import version

    mod = importlib.import_module(module)
    with pytest.raises(SystemExit) as stop:  # argparse's way, as for --help
        mod.main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"{mod.PROG} {version('bangla-tokfair')} (bangla-tokfair)"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_off_disables_every_bar_and_puts_tqdm_back():
    from tqdm import tqdm

    init = tqdm.__dict__["__init__"]
    drawn = _Terminal()
    with cli.bars_off():
        for _ in tqdm(range(3), file=drawn, disable=False):  # as lm-evaluation-harness asks for its bars
            pass
    assert drawn.getvalue() == "" and tqdm.__dict__["__init__"] is init
    for _ in tqdm(range(3), file=drawn):
        pass
    assert "\r" in drawn.getvalue()


@pytest.mark.parametrize(("terminal", "no_progress", "drawn"), [(True, False, True), (True, True, False),
                                                                 (False, False, False)])
def test_a_command_draws_bars_only_on_a_terminal_without_no_progress(monkeypatch, terminal, no_progress, drawn):
    import argparse

    from tqdm import tqdm

    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)

    def build():
        p = cli.parser("demo")
        p.add_argument("--no-progress", action="store_true")
        return p

    def run(args):
        for _ in tqdm(range(3), file=sys.stderr):
            pass
        return 0

    assert cli.run_command("demo", build, run, ["--no-progress"] if no_progress else []) == 0
    assert ("\r" in err.getvalue()) is drawn
    assert cli.bars_wanted(argparse.Namespace(no_progress=no_progress)) is (terminal and not no_progress)
