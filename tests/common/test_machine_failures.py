"""The machine's own failures (a full disk, a quota, too many open files, an I/O error) and a reader that closes
the pipe: one line and exit 74 (EX_IOERR), or a quiet 141, never a traceback (docs/contract.md, Exit codes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV_FULL = Path("/dev/full")
EXIT_MACHINE = 74  # EX_IOERR of sysexits.h: the machine failed, not the input
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a writer whose reader went away

_HEADER = """import errno, os, resource, sys
from common import cli, paths
def build():
    p = cli.parser("demo")
    p.add_argument("--out", type=paths.output_dir)
    return p
def run(args):
"""


def _command(body: str, argv: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    """A command whose ``run`` is ``body``, under the one top-level handler (common.cli.run_command)."""
    code = _HEADER + textwrap.indent(textwrap.dedent(body).strip(), "    ")
    code += '\nsys.exit(cli.run_command("demo", build, run, sys.argv[1:]))\n'
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-c", code, *argv], stderr=subprocess.PIPE, text=True, timeout=120,
                          cwd=ROOT, **kwargs)


def _one_line(proc: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


@pytest.mark.parametrize(("name", "words"), [
    ("ENOSPC", ["no space left on device", "writing /data/out/shard.bin"]),
    ("EDQUOT", ["disk quota exceeded", "writing /data/out/shard.bin"]),
    ("EMFILE", ["too many open files", "ulimit -n"]),
    ("ENFILE", ["too many open files", "system"]),
    ("EIO", ["input/output error", "/data/out/shard.bin"]),
])
def test_the_machines_failure_is_one_line_and_exit_74(name, words):
    proc = _command(f"raise OSError(errno.{name}, os.strerror(errno.{name}), '/data/out/shard.bin')")
    _one_line(proc, EXIT_MACHINE, "demo: error: ", *words)


def test_a_failure_wrapped_by_a_library_is_found_in_the_chain():
    raised_from = _command("""
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/data/out/x.parquet")
        except OSError as e:
            raise RuntimeError("arrow: write failed") from e
        """)
    _one_line(raised_from, EXIT_MACHINE, "no space left on device", "/data/out/x.parquet")
    during = _command("""
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError:
            raise ValueError("cannot open shard")
        """)
    _one_line(during, EXIT_MACHINE, "too many open files", "ulimit -n")
    grouped = _command("""
        raise ExceptionGroup("tasks", [OSError(errno.EIO, "Input/output error", "/mnt/disk/a")])
        """)
    _one_line(grouped, EXIT_MACHINE, "input/output error", "/mnt/disk/a")


def test_a_bug_still_keeps_its_traceback_and_input_errors_stay_2():
    bug = _command("raise RuntimeError('a bug') from OSError(errno.EPERM, 'x')")
    assert bug.returncode == 1 and "Traceback" in bug.stderr
    missing = _command("open('/nonexistent/bn.txt')")
    _one_line(missing, 2, "/nonexistent/bn.txt")


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full (Linux)")
def test_a_real_full_device_and_a_real_open_file_limit():
    full = _command("""
        with open("/dev/full", "w") as f:
            f.write("x" * 100_000)
        """, ("--out", "/data/new-report"))  # a write's error names no file: the command's output is named
    _one_line(full, EXIT_MACHINE, "no space left on device writing --out /data/new-report: free some space")
    limit = _command("""
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        kept = [open(os.devnull) for _ in range(100)]
        """)
    _one_line(limit, EXIT_MACHINE, "too many open files", "64", "ulimit -n", os.devnull)


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full (Linux)")
def test_standard_output_on_a_full_disk_is_one_line_not_an_exit_time_traceback():
    with open(DEV_FULL, "w") as full:
        printed = _command("print('a line of the report')", stdout=full)
        both = _command("print('x')", ("--out", "/data/report"), stdout=full)
    _one_line(printed, EXIT_MACHINE, "demo: error: no space left on device writing standard output: ")
    _one_line(both, EXIT_MACHINE, "no space left on device writing --out /data/report or standard output: ")


def _closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone (``| head -1`` once head has its line)."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize("body", ["print('x' * 1_000_000)", "print('one short line')",
                                  "sys.stdout.write('x'); sys.stdout.flush(); return 0"])
def test_a_closed_pipe_ends_quietly_with_141(body):
    write = _closed_pipe()
    try:
        proc = _command(body, stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == EXIT_PIPE and proc.stderr == "", proc.stderr


def _report(tmp_path: Path, stdout) -> subprocess.CompletedProcess:
    text = tmp_path / "en.txt"
    text.write_text("The quick brown fox jumps over the lazy dog.\n" * 20, encoding="utf-8")
    argv = ["-m", "fertility", "report", "--tokenizer", "gpt2", "--text", f"en={text}", "--out",
            str(tmp_path / "report"), "--no-progress"]
    return subprocess.run([sys.executable, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
                          cwd=ROOT)


def test_a_real_command_into_a_closed_pipe_ends_quietly(tmp_path):
    write = _closed_pipe()
    try:
        proc = _report(tmp_path, write)
    finally:
        os.close(write)
    assert proc.returncode == EXIT_PIPE and proc.stderr == "", (proc.returncode, proc.stderr)


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full (Linux)")
def test_a_real_commands_table_on_a_full_device_is_one_line(tmp_path):
    with open(DEV_FULL, "w") as full:
        proc = _report(tmp_path, full)
    _one_line(proc, EXIT_MACHINE, "fertility: error: no space left on device writing --out ", "or standard output")
