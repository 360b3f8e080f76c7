"""common.paths: every option of every command declares what its path may be used for, and each role's one
policy holds for every option of that role, including options nobody wrote a test for.

The inventory walks every parser of every command (the console scripts in pyproject.toml, each subcommand,
and the supervisor's ``python -m`` parser); the per-role tests then draw their cases from that inventory, so a
new option is covered the day it is declared.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import tomllib
from pathlib import Path

import pytest

from common import cli, paths
from common.errors import OutputPathError
from common.outdir import MARKER
from common.paths import Role

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "fertility", "tokenizers_train", "corpus", "pretrain")
# Commands that are no console script: the supervisor `pretrain launch` starts as `python -m`.
MODULE_COMMANDS = ("pretrain.guard.supervisor",)


def command_modules() -> dict[str, object]:
    """Every command's module (it has ``build_parser`` and ``main``), by the name a user types."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    # Each script is its package's light __main__ (common.signals.launch), which runs the package's cli module.
    found = {name: importlib.import_module(target.split(":")[0].removesuffix(".__main__") + ".cli")
             for name, target in scripts.items()}
    found |= {f"python -m {name}": importlib.import_module(name) for name in MODULE_COMMANDS}
    return found


def walk(parser: argparse.ArgumentParser, chain: tuple[str, ...] = ()):
    """(subcommand chain, action) for every action of ``parser`` and of each of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*chain, name))
        else:
            yield chain, action


def path_options(roles: tuple[Role, ...]) -> list[tuple[str, tuple[str, ...], argparse.Action]]:
    found = []
    for command, module in command_modules().items():
        for chain, action in walk(module.build_parser()):
            if paths.takes_value(action) and paths.role_of(action) in roles:
                found.append((command, chain, action))
    return found


def _id(case) -> str:
    command, chain, action = case
    return " ".join([command, *chain, (action.option_strings or [action.dest])[0]])


# --- the inventory ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", sorted(command_modules()))
def test_every_option_that_takes_a_value_declares_its_role(command):
    missing = paths.undeclared(command_modules()[command].build_parser(), command)
    assert not missing, (
        "options that take a value but declare no path role (common.paths): " + ", ".join(missing) +
        ". Give each a type= of its role: paths.input_path / input_spec() / name_or_path (read only), "
        "paths.output_dir, paths.output_file, paths.work_dir; or paths.not_a_path / paths.text, a common.cli "
        "number or label type, or choices= if it is never a path")


def test_every_module_that_declares_options_is_a_command_the_inventory_walks():
    """A parser built outside the commands above (a new command module) would escape the inventory."""
    from pretrain.cli import COMMANDS

    covered = {Path(m.__file__).resolve() for m in command_modules().values()}
    covered |= {Path(module.__file__).resolve() for module, _ in COMMANDS.values()}
    declaring = {p.resolve() for package in PACKAGES for p in (ROOT / package).rglob("*.py")
                 if "add_argument(" in p.read_text(encoding="utf-8")}
    # Helpers that add options to a parser a command passes them; the inventory walks them in those commands.
    declaring -= {ROOT / "common" / "cli.py", ROOT / "common" / "paths.py", ROOT / "fertility" / "premium.py"}
    assert declaring <= covered, sorted(str(p.relative_to(ROOT)) for p in declaring - covered)


def test_the_inventory_finds_an_option_nobody_gave_a_role():
    p = cli.parser("demo")
    sub = p.add_subparsers(dest="command")
    report = sub.add_parser("report")
    report.add_argument("--report-file")                        # str, no type: could be any path
    report.add_argument("--notes", type=str)
    report.add_argument("source")                               # a positional is a value too
    report.add_argument("--steps", type=cli.positive_int)       # a number is never a path
    report.add_argument("--lang", type=cli.label)
    report.add_argument("--mode", choices=("a", "b"))
    report.add_argument("--pid", type=int)
    report.add_argument("--host", type=paths.text)              # said in so many words: not a path
    report.add_argument("--out", type=paths.output_file)
    report.add_argument("--quiet", action="store_true")         # takes no value
    assert paths.undeclared(p) == ["demo report --report-file", "demo report --notes", "demo report source"]


def test_each_role_is_read_from_the_action():
    p = cli.parser("demo")
    for flag, kind in [("--a", paths.input_path), ("--b", paths.input_spec()), ("--c", paths.name_or_path),
                       ("--d", paths.output_dir), ("--e", paths.output_file), ("--f", paths.work_dir),
                       ("--g", paths.text), ("--h", cli.fraction)]:
        p.add_argument(flag, type=kind)
    roles = {a.option_strings[0]: paths.role_of(a) for a in p._actions if a.option_strings[0] not in ("-h", "--version")}
    assert roles == {"--a": Role.INPUT, "--b": Role.INPUT, "--c": Role.INPUT, "--d": Role.OUTPUT_DIR,
                     "--e": Role.OUTPUT_FILE, "--f": Role.WORK_DIR, "--g": Role.NOT_PATH, "--h": Role.NOT_PATH}


# --- what every path option refuses at parse time, whoever declared it -----------------------------------------

def _value(action: argparse.Action, path: str) -> str:
    return f"bn={path}" if getattr(action.type, "labelled", False) else path


def _argv(chain: tuple[str, ...], action: argparse.Action, value: str) -> list[str]:
    return [*chain, *(action.option_strings[:1]), value]


def _refused(command: str, chain, action, value: str, capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        command_modules()[command].main(_argv(chain, action, value))
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    name = action.option_strings[0] if action.option_strings else action.dest
    assert name in err, err
    return err


@pytest.mark.parametrize("case", path_options(paths.PATH_ROLES), ids=_id)
def test_a_file_name_too_long_for_the_system_is_one_line_naming_the_option(case, tmp_path, capsys):
    command, chain, action = case
    err = _refused(command, chain, action, _value(action, str(tmp_path / ("x" * 300 + ".txt"))), capsys)
    assert "304 bytes" in err and "255" in err, err


def _loop(path: Path) -> None:
    path.symlink_to(path)


@pytest.mark.parametrize("fault, make, expected", [("symlink loop", _loop, "symlink loop"),
                                                   # a FIFO with no writer would block in silence
                                                   ("FIFO", os.mkfifo, "FIFO")])
@pytest.mark.parametrize("case", path_options((Role.INPUT,)), ids=_id)
def test_an_input_that_is_a_symlink_loop_or_a_fifo_is_one_line_up_front(case, fault, make, expected, tmp_path,
                                                                        capsys):
    command, chain, action = case
    make(tmp_path / "bn.txt")
    err = _refused(command, chain, action, _value(action, str(tmp_path / "bn.txt")), capsys)
    assert expected in err and "no such file" not in err.lower(), err


@pytest.mark.parametrize("case", [c for c in path_options((Role.INPUT,)) if c[2].type.expects], ids=_id)
def test_an_input_of_the_wrong_kind_is_refused_at_parse_time(case, tmp_path, capsys):
    """A folder where a file is read (a checkpoint), a file where a folder is (shards): one line, not a
    traceback from deep inside (``pretrain export --checkpoint .`` was a ValueError from pathlib)."""
    command, chain, action = case
    (tmp_path / "notes.txt").write_text("the user's\n")
    wrong, expected = ((tmp_path, "not a file") if action.type.expects == "file" else
                       (tmp_path / "notes.txt", "not a folder"))
    assert expected in _refused(command, chain, action, _value(action, str(wrong)), capsys)


def test_a_dangling_link_names_where_it_points(tmp_path):
    link = tmp_path / "bn.txt"
    link.symlink_to(tmp_path / "moved.txt")
    with pytest.raises(argparse.ArgumentTypeError, match="moved.txt, which does not exist"):
        paths.input_path(str(link))


# --- the output-file policy ------------------------------------------------------------------------------------

def _ours(path: Path) -> Path:
    path.write_text(json.dumps(paths.stamped({"tokens_per_s": 1.0})), encoding="utf-8")
    return path


def test_an_output_file_of_ours_is_replaced_only_with_overwrite(tmp_path):
    report = _ours(tmp_path / "bench.json")
    with pytest.raises(OutputPathError, match="--overwrite"):
        paths.check_output_file(report)
    assert paths.check_output_file(report, overwrite=True) == report
    assert paths.check_output_file(tmp_path / "new.json") == tmp_path / "new.json"


@pytest.mark.parametrize("content", ["the user's notes\n", '{"tokens_per_s": 1}', '{"written_by": "someone"}',
                                     '["written_by", "bangla-tokfair"]', "\xff"])
def test_a_file_this_project_did_not_write_is_never_replaced(tmp_path, content):
    notes = tmp_path / "notes.json"
    notes.write_text(content, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(OutputPathError, match="not written by this project"):
        paths.check_output_file(notes, overwrite=True)


def test_an_output_file_is_never_an_input_nor_inside_an_input_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    text = _ours(data / "bn.json")
    with pytest.raises(OutputPathError, match="is the input"):
        paths.check_output_file(text, overwrite=True, inputs=[text])
    with pytest.raises(OutputPathError, match="inside the input folder"):
        paths.check_output_file(data / "new.json", inputs=[data])


def test_an_output_file_is_never_inside_a_folder_this_project_published(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / MARKER).write_text(json.dumps(paths.stamped({"command": "pretrain launch"})))
    best = _ours(run / "checkpoints" / "best.json")
    for target in (run / "config.json", best, run / "checkpoints" / "new.json"):
        with pytest.raises(OutputPathError, match=MARKER):
            paths.check_output_file(target, overwrite=True)
    assert paths.check_output_file(run / "config.json", overwrite=True, own=True)  # the trainer's own file


def test_an_output_file_is_never_a_link_a_fifo_or_a_folder(tmp_path):
    target = _ours(tmp_path / "ours.json")
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "reports").mkdir()
    for name, message in [("link.json", "symbolic link"), ("fifo.json", "not a regular file"), ("reports", "folder")]:
        with pytest.raises(OutputPathError, match=message):
            paths.check_output_file(tmp_path / name, overwrite=True)


def _demo(tmp_path: Path) -> tuple[argparse.ArgumentParser, Path]:
    p = cli.parser("demo")
    p.add_argument("--run", type=paths.input_dir("eval.json"))
    p.add_argument("--text", action="append", default=[], type=paths.input_spec())
    p.add_argument("--out", type=paths.output_file)
    p.add_argument("--work-dir", type=paths.work_dir)
    p.add_argument("--overwrite", action="store_true")
    run = tmp_path / "run"
    run.mkdir()
    (run / MARKER).write_text(json.dumps(paths.stamped({"command": "pretrain launch"})))
    (run / "config.json").write_text("{}")
    (run / "eval.json").write_text("{}")  # written by an older version: no stamp, but the command's own file
    return p, run


def test_check_args_keeps_output_files_and_work_folders_apart_from_every_input(tmp_path, monkeypatch):
    p, run = _demo(tmp_path)
    monkeypatch.chdir(tmp_path)
    bn = tmp_path / "bn.jsonl"
    bn.write_text('{"text": "x"}\n')

    def check(*argv):
        paths.check_args(p, p.parse_args(list(argv)))

    check("--run", str(run), "--out", str(run / "eval.json"), "--overwrite")  # its own output there
    for argv, message in [
            (["--run", str(run), "--out", str(run / "config.json"), "--overwrite"], "input folder"),
            (["--text", f"bn={bn}:text", "--out", str(bn), "--overwrite"], "is the input"),
            (["--text", f"bn={bn}", "--work-dir", str(tmp_path)], "current folder"),
            (["--run", str(run), "--work-dir", str(run / "work")], "input"),
            (["--text", f"bn={bn}", "--work-dir", str(bn)], "not a folder")]:
        with pytest.raises(OutputPathError, match=message):
            check(*argv)
    # A folder of the user's given where a run goes has no file of the command's own: its eval.json (the
    # user's notes) is never replaced, --overwrite or not.
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "eval.json").write_text("my notes")
    with pytest.raises(OutputPathError, match="input folder"):
        check("--run", str(thesis), "--out", str(thesis / "eval.json"), "--overwrite")
    assert (thesis / "eval.json").read_text() == "my notes"


def test_the_input_spec_path_is_found_in_every_form(tmp_path):
    bn = tmp_path / "bn.jsonl"
    bn.write_text("{}\n")
    assert paths.spec_path(f"bn={bn}", labelled=True) == str(bn)
    assert paths.spec_path(f"bn={bn}:text", labelled=True) == str(bn)
    assert paths.spec_path("bn=hf:org/name:config", labelled=True) is None
    assert paths.spec_path("hf://datasets/x/*.parquet") is None
    assert paths.spec_path("gpt2") is None


# --- the top-level handler: system errors on a path the command derived ---------------------------------------

@pytest.mark.parametrize("code, expected", [(errno.ELOOP, "symlink loop"), (errno.ENAMETOOLONG, "File name too long")])
def test_a_path_error_raised_during_the_work_is_one_line(code, expected, capsys):
    def run(args):
        raise OSError(code, os.strerror(code), "/data/bn.txt")

    assert cli.run_command("demo", lambda: cli.parser("demo"), run, []) == 2
    assert capsys.readouterr().err == f"demo: error: /data/bn.txt: {expected}\n"
