"""The command-line contract (docs/contract.md) for `pretrain launch / eval / bench / export`: bad input is
refused with exit 2 and one line naming the option, file or field, before any work, and leaves every file of
the user's as it was; nothing is created where OUT was asked for.

Each case runs in-process; none of them trains a step (they are refused at parse time, or by the checks
before the device, the data and the model are touched)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.outdir import MARKER
from pretrain.cli import main

READ_ONLY = Path("/proc/1")  # refuses new files even to root (CI runs as root, where chmod 555 is no barrier)


@dataclass
class Env:
    """A user's folder: a copy of the synthetic shards (vocabulary 512), and OUT, which does not exist yet."""

    root: Path
    data: Path
    out: Path

    def folder(self, name: str, *files: str) -> Path:
        """A folder of the user's holding ``files`` (non-empty unless none are named)."""
        path = self.root / name
        path.mkdir()
        for f in files:
            (path / f).write_text("the user's\n", encoding="utf-8")
        return path

    def file(self, name: str, text: str = "the user's\n") -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def run(self, name: str = "run") -> Path:
        """A run folder of ours that has trained (its marker and config.json), without checkpoints."""
        path = self.folder(name)
        (path / MARKER).write_text(json.dumps({"written_by": "bangla-tokfair", "command": "pretrain launch"}))
        (path / "config.json").write_text("{}")
        return path

    def config(self, name: str, vocab_size: int, **changes: dict) -> Path:
        from pretrain.config import preset

        raw = preset("tiny", vocab_size).to_dict()
        for section, values in changes.items():
            raw[section].update(values)
        return self.file(name, json.dumps(raw))

    def trained(self, name: str = "run") -> Path:
        """A run of ours with a checkpoint file in it (checkpoints/best.pt)."""
        path = self.run(name)
        (path / "checkpoints").mkdir()
        (path / "checkpoints" / "best.pt").write_bytes(b"a checkpoint of the user's run")
        return path

    def checkpoint(self, name: str = "step_00000004.pt") -> Path:
        """A checkpoint file whose sidecar names another sha256 (what a flipped bit looks like)."""
        path = self.file(name, "not a checkpoint")
        path.with_suffix(".json").write_text(json.dumps({"file": name, "sha256": "0" * 64}))
        return path


def launch(env: Env, *extra: str) -> list[str]:
    return ["launch", "--config", "tiny", "--data", str(env.data), "--out", str(env.out), "--no-supervisor",
            "--no-eval", *extra]


# name -> (argv of the case, the names its one line must hold)
Case = Callable[[Env], tuple[list[str], list[str]]]
CASES: dict[str, Case] = {
    # --- launch: numbers, refused at parse time ---------------------------------------------------------------
    "launch --max-steps -1": lambda e: (launch(e, "--max-steps", "-1"), ["--max-steps", "-1"]),
    "launch --micro-batch 0": lambda e: (launch(e, "--micro-batch", "0"), ["--micro-batch"]),
    "launch --lr nan": lambda e: (launch(e, "--lr", "nan"), ["--lr"]),
    "launch --global-batch-tokens 0": lambda e: (launch(e, "--global-batch-tokens", "0"), ["--global-batch-tokens"]),
    "launch --time-budget-s -5": lambda e: (launch(e, "--time-budget-s", "-5"), ["--time-budget-s"]),
    "launch --seed -1": lambda e: (launch(e, "--seed", "-1"), ["--seed"]),
    "launch --set supervisor.window 0": lambda e: (launch(e, "--set", "supervisor.window=0"), ["supervisor.window"]),
    "launch --set supervisor.halt_policy": lambda e: (launch(e, "--set", "supervisor.halt_policy=ignore"),
                                                      ["supervisor.halt_policy", "ignore"]),
    "launch --set supervisor unknown field": lambda e: (launch(e, "--set", "supervisor.windw=3"), ["windw"]),
    "launch --device gpu7": lambda e: (launch(e, "--device", "gpu7"), ["--device", "gpu7"]),
    # --- launch: config fields (--set, config JSON) -------------------------------------------------------------
    "launch --set warmup -1": lambda e: (launch(e, "--set", "optim.warmup_steps=-1"), ["optim.warmup_steps"]),
    "launch --set eval_interval 0": lambda e: (launch(e, "--set", "train.eval_interval=0"), ["train.eval_interval"]),
    "launch --set threads -2": lambda e: (launch(e, "--set", "train.threads=-2"), ["train.threads"]),
    "launch --set checkpoint_interval 0": lambda e: (launch(e, "--set", "train.checkpoint_interval=0"),
                                                     ["train.checkpoint_interval"]),
    "launch --set n_head 3": lambda e: (launch(e, "--set", "model.n_head=3"), ["--set", "n_head"]),
    "launch --set unknown field": lambda e: (launch(e, "--set", "train.max_step=3"), ["max_step"]),
    "launch --set schedule": lambda e: (launch(e, "--set", "optim.schedule=linear"), ["schedule", "linear"]),
    "launch --set optim.name unknown": lambda e: (launch(e, "--set", "optim.name=lion"),
                                                  ["optim.name", "adamw, muon", "lion"]),
    "launch --optimizer unknown": lambda e: (launch(e, "--optimizer", "lion"), ["--optimizer", "lion"]),
    "launch --set muon_adjust_lr_fn": lambda e: (launch(e, "--set", "optim.muon_adjust_lr_fn=spectral"),
                                                 ["optim.muon_adjust_lr_fn", "match_rms_adamw", "spectral"]),
    "launch --set muon_ns_steps 100": lambda e: (launch(e, "--set", "optim.muon_ns_steps=100"),
                                                 ["optim.muon_ns_steps", "100"]),
    "launch muon with FSDP2": lambda e: (launch(e, "--optimizer", "muon", "--set", "train.fsdp=yes"),
                                         ["optim.name=muon", "train.fsdp=yes", "train.fsdp=no"]),
    "launch config JSON muon with FSDP2": lambda e: (
        launch(e, "--config", str(e.config("cfg.json", 512, optim={"name": "muon"}, train={"fsdp": "yes"}))),
        ["cfg.json", "optim.name=muon", "train.fsdp=yes"]),
    "launch batch not a multiple of the context": lambda e: (launch(e, "--global-batch-tokens", "100"),
                                                             ["train.global_batch_tokens", "100"]),
    "launch --max-steps 0 without a budget": lambda e: (launch(e, "--max-steps", "0"), ["--max-steps 0"]),
    "launch --inject-fault unknown": lambda e: (launch(e, "--inject-fault", "meteor@3"), ["--inject-fault", "meteor"]),
    "launch unknown preset": lambda e: (launch(e, "--config", "huge"), ["--config", "huge"]),
    "launch corrupt config JSON": lambda e: (launch(e, "--config", str(e.file("cfg.json", '{"model": {,}}'))),
                                             ["cfg.json", "line 1, column 12"]),
    "launch config JSON with an unknown field": lambda e: (
        launch(e, "--config", str(e.config("cfg.json", 512, train={"max_step": 3}))), ["cfg.json", "max_step"]),
    "launch config JSON out of range": lambda e: (
        launch(e, "--config", str(e.config("cfg.json", 512, optim={"lr": -1}))), ["cfg.json", "optim.lr"]),
    "launch config JSON missing": lambda e: (launch(e, "--config", str(e.root / "none.json")), ["--config", "none.json"]),
    "launch shards of another vocabulary than --config": lambda e: (
        launch(e, "--config", str(e.config("small.json", 128)), "--max-steps", "2"), ["manifest.json", "512", "128"]),
    "launch --tokenizer of other shards": lambda e: (launch(e, "--tokenizer", "6" * 64), ["manifest.json", "6" * 64]),
    # --- launch: data and --out ---------------------------------------------------------------------------------
    "launch --data FILE": lambda e: (launch(e, "--data", str(e.file("shards.bin"))), ["--data", "shards.bin"]),
    "launch --data missing": lambda e: (launch(e, "--data", str(e.root / "nowhere")), ["--data", "nowhere"]),
    "launch --data without manifest": lambda e: (launch(e, "--data", str(e.folder("notes", "a.txt"))),
                                                 ["--data", "manifest.json"]),
    "launch --out read-only": lambda e: (launch(e, "--out", str(READ_ONLY / "run")), ["--out", str(READ_ONLY)]),
    "launch --out FILE": lambda e: (launch(e, "--out", str(e.file("run.txt"))), ["--out", "run.txt"]),
    "launch --out foreign folder": lambda e: (launch(e, "--out", str(e.folder("photos", "cat.jpg"))),
                                              ["--out", "photos", "did not write"]),
    "launch --out a run without --resume": lambda e: (launch(e, "--out", str(e.run())), ["--out", "--resume"]),
    "launch --out the shards": lambda e: (launch(e, "--out", str(e.data)), ["--out", "input"]),
    "launch --resume foreign folder": lambda e: (launch(e, "--out", str(e.folder("photos", "cat.jpg")), "--resume"),
                                                 ["--out", "photos"]),
    "launch --resume no run": lambda e: (["launch", "--out", str(e.out), "--resume"], ["--config", "config.json"]),
    "launch --resume-from missing": lambda e: (launch(e, "--resume-from", str(e.root / "step_9.pt")),
                                               ["--resume-from", "step_9.pt"]),
    # --- eval ---------------------------------------------------------------------------------------------------
    "eval --max-tokens -1": lambda e: (["eval", "--run", str(e.out), "--max-tokens", "-1"], ["--max-tokens"]),
    "eval --batch-size 0": lambda e: (["eval", "--run", str(e.out), "--batch-size", "0"], ["--batch-size"]),
    "eval --run not a run": lambda e: (["eval", "--run", str(e.folder("photos", "cat.jpg"))], ["--run", "photos"]),
    "eval --run missing": lambda e: (["eval", "--run", str(e.out)], ["--run", str(e.out)]),
    "eval --run without a checkpoint": lambda e: (["eval", "--run", str(e.run())], ["--run", "no checkpoint"]),
    "eval --text bad label": lambda e: (["eval", "--run", str(e.out), "--text", f"../bn={e.file('bn.txt')}"],
                                        ["--text", "../bn"]),
    "eval --text missing file": lambda e: (["eval", "--checkpoint", str(e.checkpoint()), "--text",
                                            f"bn={e.root / 'bn.txt'}", "--out", str(e.out / "e.json")], ["bn.txt"]),
    "eval --out existing file": lambda e: (["eval", "--run", str(e.out), "--out", str(e.file("eval.json"))],
                                           ["--out", "eval.json", "--overwrite"]),
    "eval --out a folder": lambda e: (["eval", "--run", str(e.out), "--out", str(e.folder("reports"))],
                                      ["--out", "reports"]),
    "eval --out read-only": lambda e: (["eval", "--run", str(e.out), "--out", str(READ_ONLY / "e.json")],
                                       ["--out", str(READ_ONLY)]),
    "eval --data FILE": lambda e: (["eval", "--run", str(e.run()), "--checkpoint", str(e.checkpoint()), "--data",
                                    str(e.file("shards.bin"))], ["--data", "shards.bin"]),
    # --- bench --------------------------------------------------------------------------------------------------
    "bench --steps 0": lambda e: (["bench", "--steps", "0"], ["--steps"]),
    "bench --warmup -1": lambda e: (["bench", "--warmup", "-1"], ["--warmup"]),
    "bench --micro-batch 0": lambda e: (["bench", "--micro-batch", "0"], ["--micro-batch"]),
    "bench --vocab-size 1.5": lambda e: (["bench", "--vocab-size", "1.5"], ["--vocab-size"]),
    "bench --config unknown": lambda e: (["bench", "--config", "huge"], ["--config", "huge"]),
    "bench --optimizer unknown": lambda e: (["bench", "--optimizer", "lion"], ["--optimizer", "lion"]),
    # --- eval --out: never a file of a run or shard folder other than its own (issue 28, defect 5) -------------
    "eval --out the run's config.json --overwrite": lambda e: (
        ["eval", "--run", str(e.trained()), "--out", str(e.root / "run" / "config.json"), "--overwrite"],
        ["--out", "config.json", "input folder"]),
    "eval --out the run's checkpoint --overwrite": lambda e: (
        ["eval", "--run", str(e.trained()), "--out", str(e.root / "run" / "checkpoints" / "best.pt"),
         "--overwrite"], ["--out", "best.pt", "input folder"]),
    "eval --out inside the shards --overwrite": lambda e: (
        ["eval", "--run", str(e.trained()), "--data", str(e.data), "--out", str(e.data / "manifest.json"),
         "--overwrite"], ["--out", "manifest.json", "input folder"]),
    "eval --out a user's file --overwrite": lambda e: (
        ["eval", "--run", str(e.trained()), "--out", str(e.file("notes.json")), "--overwrite"],
        ["--out", "notes.json", "not written by this project"]),
    # --- bench --out: a new file, or one of ours with --overwrite (issue 28, defect 3) ------------------------
    "bench --out existing file": lambda e: (["bench", "--steps", "1", "--warmup", "0", "--no-hf", "--out",
                                             str(e.file("bench.json"))], ["--out", "bench.json", "--overwrite"]),
    "bench --out a user's file --overwrite": lambda e: (
        ["bench", "--steps", "1", "--warmup", "0", "--no-hf", "--out", str(e.file("bench.json")), "--overwrite"],
        ["--out", "bench.json", "not written by this project"]),
    "bench --out a folder": lambda e: (["bench", "--steps", "1", "--warmup", "0", "--no-hf", "--out",
                                        str(e.folder("reports"))], ["--out", "reports", "folder"]),
    "bench --out the run's config.json --overwrite": lambda e: (
        ["bench", "--steps", "1", "--warmup", "0", "--no-hf", "--out", str(e.run() / "config.json"), "--overwrite"],
        ["--out", "config.json", MARKER]),
    # --- export -------------------------------------------------------------------------------------------------
    "export --dtype unknown": lambda e: (["export", "--checkpoint", str(e.checkpoint()), "--out", str(e.out),
                                          "--dtype", "int3"], ["--dtype", "int3"]),
    "export --out foreign folder": lambda e: (["export", "--checkpoint", str(e.checkpoint()), "--out",
                                               str(e.folder("photos", "cat.jpg"))], ["--out", "photos"]),
    "export --out an export without --overwrite": lambda e: (
        ["export", "--checkpoint", str(e.checkpoint()), "--out", str(e.folder("hf", MARKER, "config.json"))],
        ["--out", "hf", "--overwrite"]),
    "export --out read-only": lambda e: (["export", "--checkpoint", str(e.checkpoint()), "--out",
                                          str(READ_ONLY / "hf")], ["--out", str(READ_ONLY)]),
    "export --checkpoint missing": lambda e: (["export", "--checkpoint", str(e.root / "step_9.pt"), "--out",
                                               str(e.out)], ["step_9.pt"]),
    "export --checkpoint corrupt": lambda e: (["export", "--checkpoint", str(e.checkpoint()), "--out", str(e.out)],
                                              ["step_00000004.pt", "corrupt"]),
}


@pytest.fixture
def env(tmp_path, synthetic_shards) -> Env:
    data = tmp_path / "shards"
    shutil.copytree(synthetic_shards, data)
    return Env(root=tmp_path, data=data, out=tmp_path / "out")


def run_main(argv: list[str], capsys) -> tuple[int, str]:
    """``pretrain ARGV`` in-process: the exit code (a parse error exits through SystemExit) and stderr."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_exit_2_and_touches_nothing(case, env, capsys, input_error, user_files):
    argv, names = CASES[case](env)
    folders = [env.data, env.root] + [Path(a) for a in argv if Path(a).is_dir() and Path(a).parent == env.root]
    keep = user_files(*dict.fromkeys(folders))
    before = sorted(p.relative_to(env.root) for p in env.root.rglob("*"))
    code, err = run_main(argv, capsys)
    input_error(code, err, *names)
    assert keep.unchanged()
    assert not env.out.exists()
    assert sorted(p.relative_to(env.root) for p in env.root.rglob("*")) == before, "nothing is written"


def test_there_are_cases_for_every_command():
    assert {name.split()[0] for name in CASES} == {"launch", "eval", "bench", "export"}
    assert len(CASES) >= 15


@pytest.mark.parametrize("read_only", [False, True])
def test_export_out_a_mount_point_is_refused_before_any_work(read_only, env, capsys, mount_point, input_error):
    """Refused before the checkpoint is even read (this one is corrupt: its error would come first otherwise)."""
    out = mount_point("volume", read_only=read_only)
    code, err = run_main(["export", "--checkpoint", str(env.checkpoint()), "--out", str(out)], capsys)
    input_error(code, err, str(out), "mount point")
    assert not any(out.iterdir())


@pytest.mark.slow
def test_export_out_a_symlink_to_an_empty_folder_is_filled_at_its_target(tiny_run, tmp_path, capsys):
    """The user's link stays a link (it was renamed to .LINK.old-PID, then a traceback)."""
    import os

    from pretrain.train.checkpoint import latest_checkpoint

    target = tmp_path / "volume" / "hf"
    target.mkdir(parents=True)
    (tmp_path / "hf").symlink_to(target)
    code, err = run_main(["export", "--checkpoint", str(latest_checkpoint(tiny_run)), "--out", str(tmp_path / "hf")],
                         capsys)
    assert code == 0, err
    assert (tmp_path / "hf").is_symlink() and os.readlink(tmp_path / "hf") == str(target)
    assert (target / "config.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["hf", "volume"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["hf"]
