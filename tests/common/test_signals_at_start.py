"""A signal from the first instant of a command: the handlers are installed before any heavy import (torch,
datatrove, tokenizers), so SIGINT, SIGTERM or SIGHUP during the imports ends the command with the one stop
line and 128 + the signal's number, never a traceback nor a silent death; SIGHUP (a closed terminal, a lost
ssh session) is handled like SIGTERM everywhere (docs/contract.md, Signals)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from common.signals import SIGNALS, Interrupted, deferred_signals

ROOT = Path(__file__).resolve().parents[2]
HOOK = Path(__file__).resolve().parent / "signal_on_import"  # its sitecustomize signals at a named import
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
# A heavy module each command imports (the imports that took 0.2-2 s before the handlers were installed).
HEAVY = {"fertility": "fertility.cli", "tokenizers-train": "tokenizers", "corpus": "datatrove", "pretrain": "torch"}


def stop_line(prog: str, sig: int) -> str:
    return f"{prog}: stopped by {signal.Signals(sig).name}; finished work is kept (rerun the same command to go on)\n"


def signalled_at_import(argv: list[str], sig: int, module: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOK), str(ROOT)]),
           "SIGNAL_ON_IMPORT": f"{signal.Signals(sig).name}:{module}"}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("prog", sorted(HEAVY))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_during_the_heavy_imports_of_python_m_is_the_one_line(prog, sig):
    package = SCRIPTS[prog].partition(".")[0]
    proc = signalled_at_import(["-m", package, "--help"], sig, HEAVY[prog])
    assert (proc.returncode, proc.stderr) == (128 + sig, stop_line(prog, sig)), proc.stderr
    assert proc.stdout == ""  # stopped before the help


@pytest.mark.parametrize("prog", sorted(HEAVY))
def test_the_console_scripts_install_the_handlers_before_the_heavy_imports(prog):
    """What ``pip install`` makes of [project.scripts]: ``from MODULE import ATTR; sys.exit(ATTR())``."""
    module, _, attr = SCRIPTS[prog].partition(":")
    code = f"import sys; from {module} import {attr}; sys.argv[1:] = ['--help']; sys.exit({attr}())"
    proc = signalled_at_import(["-c", code], signal.SIGTERM, HEAVY[prog])
    assert (proc.returncode, proc.stderr) == (143, stop_line(prog, signal.SIGTERM)), proc.stderr


def test_the_light_entry_still_runs_the_command():
    proc = subprocess.run([sys.executable, "-m", "corpus", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: corpus") and proc.stderr == ""


def test_sighup_is_one_line_and_129(tmp_path):
    ready = tmp_path / "ready"
    code = textwrap.dedent(f"""
        import os, pathlib, sys
        from common import cli
        def run(args):
            pathlib.Path({str(ready)!r}).write_text("x")
            while True:
                os.sched_yield()
        sys.exit(cli.run_command("demo", lambda: cli.parser("demo"), run, []))
        """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        while not ready.exists():  # synchronise on the file the command writes, never on time
            assert proc.poll() is None, proc.communicate()
            os.sched_yield()
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (129, stop_line("demo", signal.SIGHUP))


def test_sighup_is_deferred_like_sigterm():
    assert signal.SIGHUP in SIGNALS  # else the signal below would end the test run itself
    before = signal.getsignal(signal.SIGHUP)
    with deferred_signals() as stop:
        os.kill(os.getpid(), signal.SIGHUP)
        assert stop.signum == signal.SIGHUP  # recorded: the loop saves its checkpoint at the next safe point
        with pytest.raises(Interrupted) as e:
            os.kill(os.getpid(), signal.SIGHUP)
        assert e.value.exit_code == 129
    assert signal.getsignal(signal.SIGHUP) == before


def test_the_fertility_package_is_light_too():
    """``import fertility`` (which ``python -m fertility`` and the script do first) loads its re-exports lazily."""
    proc = signalled_at_import(["-m", "fertility", "--help"], signal.SIGTERM, "numpy")
    assert (proc.returncode, proc.stderr) == (143, stop_line("fertility", signal.SIGTERM)), proc.stderr


@pytest.mark.parametrize("package", ["fertility", "tokenizers_train", "corpus", "pretrain"])
def test_the_entry_imports_nothing_heavy(package):
    code = (f"import sys, {package}.__main__; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'torch', 'datatrove', 'tokenizers', "
            f"'transformers', 'fertility', 'corpus', 'pretrain', 'tokenizers_train') and m != '{package}'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"['{package}.__main__']", (proc.stdout, proc.stderr)
