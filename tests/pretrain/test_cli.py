"""The `pretrain` command: refusals before any step, resume rules, preflight, time budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.cli import main


def test_shards_of_another_tokenizer_are_refused_before_training(micro, shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(shards, run, 5, "--tokenizer", "o200k_base")) == 2
    err = capsys.readouterr().err
    assert "gpt2" in err and "o200k_base" in err
    assert not (run / "metrics.jsonl").exists()


def test_resume_on_shards_of_another_tokenizer_is_refused(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 4)) == 0
    other = micro.write_synthetic(tmp_path / "other", train_tokens=5000, val_tokens=500, sha256="6" * 64)
    assert main(micro.args(other, run, 8, "--resume")) == 2
    assert "was trained with sha256 " + "5" * 64 in capsys.readouterr().err
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 4  # not a single step more


def test_existing_run_needs_resume_and_shape_cannot_change(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 2)) == 0
    assert main(micro.args(synthetic_shards, run, 4)) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(micro.args(synthetic_shards, run, 4, "--resume", "--set", "model.n_layer=3")) == 2
    assert "model.n_layer: 2 -> 3" in capsys.readouterr().err
    assert main(micro.args(synthetic_shards, run, 4, "--resume")) == 2
    assert "--replan-schedule" in capsys.readouterr().err  # more steps re-plan the learning rate: say so
    assert main(micro.args(synthetic_shards, run, 4, "--resume", "--replan-schedule")) == 0
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 4


def test_bad_override_is_a_clear_error(micro, synthetic_shards, tmp_path, capsys):
    assert main(micro.args(synthetic_shards, tmp_path / "r", 2, "--set", "train.max_step=3")) == 2
    assert "train has no field 'max_step'" in capsys.readouterr().err


def test_preflight_only_and_time_budget(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 50, "--preflight-only")) == 0
    report = json.loads((run / "preflight.json").read_text())
    assert report["ok"] and report["arbiter"]["ok"] and report["arbiter"]["checked"] == 14
    assert report["burst"]["kind"] == "measured" and report["burst"]["tokens_per_s"] > 0
    assert report["estimate"]["steps_remaining"] == 50
    assert not (run / "metrics.jsonl").exists()
    # --max-steps 0 with a time budget: the preflight burst sizes the run to fit the budget.
    run2 = tmp_path / "budget"
    assert main(micro.args(synthetic_shards, run2, 0, "--time-budget-s", "3")) == 0
    steps = json.loads((run2 / "config.json").read_text())["train"]["max_steps"]
    assert steps > 0 and read_jsonl(run2 / "metrics.jsonl")[-1]["step"] <= steps


def _copy_shards(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_replaced_tokenizer_file_fails_the_preflight(micro, sample_dir, tmp_path, capsys):
    """Finding: the tokenizer file was overwritten by another of the same vocabulary size after the shards were
    built, and the preflight said it matched (it printed the manifest's hash, not the file's)."""
    import shutil

    tok_dir = tmp_path / "tok"
    shutil.copytree(micro.root / "data" / "tokenizers" / "gpt2", tok_dir)
    data = micro.write_real(tmp_path / "shards", {"bn": [sample_dir / "bn" / "literature-bnarchive.txt.gz"]},
                            train_chars=3000, val_chars=1000, tokenizer=str(tok_dir))
    assert main(micro.args(data, tmp_path / "ok", 5, "--preflight-only")) == 0
    report = json.loads((tmp_path / "ok" / "preflight.json").read_text())
    assert report["data"]["tokenizer_check"].startswith("ok:")
    merges = (tok_dir / "merges.txt").read_text().splitlines()
    merges[1], merges[2] = merges[2], merges[1]  # another tokenizer, same vocabulary
    (tok_dir / "merges.txt").write_text("\n".join(merges) + "\n")
    capsys.readouterr()
    assert main(micro.args(data, tmp_path / "replaced", 5, "--preflight-only")) == 2
    err = capsys.readouterr().err
    assert "it was replaced or is another tokenizer" in err
    report = json.loads((tmp_path / "replaced" / "preflight.json").read_text())
    assert not report["ok"] and report["data"]["tokenizer_check"].startswith("FAIL")


def test_a_flipped_byte_in_a_shard_fails_the_preflight(micro, shards, tmp_path, capsys):
    """Finding: `corpus inspect` failed a shard with one flipped byte, `pretrain launch --preflight-only` passed it."""
    data = _copy_shards(shards, tmp_path / "shards")
    shard = data / "train_000.bin"
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # a token id changes, still in range, header intact
    shard.write_bytes(bytes(raw))
    assert main(micro.args(data, tmp_path / "run", 5, "--preflight-only")) == 2
    assert "train_000.bin: content hash differs from the manifest's" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_launch_help_names_the_supervisor_section(capsys):
    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--set supervisor.halt_policy=rollback" in out and "sections: model, optim, data, train, supervisor" in out
    assert "--max-steps N" in out and "--time-budget-s SECONDS" in out and "--sup-" not in out


def _old_config(**train) -> dict:
    """A config.json as runs wrote it before the supervisor section: its settings inside train."""
    from pretrain.config import preset

    raw = preset("tiny", 300).to_dict()
    del raw["supervisor"]
    raw["train"].update(train)
    return raw


def test_an_old_runs_supervisor_args_become_its_supervisor_section():
    from pretrain.config import RunConfig, SupervisorConfig

    cfg = RunConfig.from_dict(_old_config(max_rollbacks=1, supervisor_args=["--window", "7", "--halt-policy=rollback"]))
    assert cfg.supervisor == SupervisorConfig(window=7, halt_policy="rollback", max_rollbacks=1)
    assert "supervisor_args" not in cfg.to_dict()["train"]
    assert RunConfig.from_dict(_old_config(max_rollbacks=3, supervisor_args=[])).supervisor == SupervisorConfig()


@pytest.mark.parametrize(("args", "names"), [(["--windw", "7"], ["'--windw'", "--window"]),
                                             (["--window", "0"], ["supervisor", "window"]),
                                             (["--window"], ["'--window'"])])
def test_an_old_runs_unusable_supervisor_args_are_refused_naming_them(args, names):
    from pretrain.config import InputError, RunConfig

    with pytest.raises(InputError) as e:
        RunConfig.from_dict(_old_config(supervisor_args=args), "RUN/config.json")
    assert "\n" not in str(e.value) and str(e.value).startswith("RUN/config.json: ")
    assert all(n in str(e.value) for n in names)


def test_resuming_an_old_run_reads_its_supervisor_args(tmp_path, capsys):
    from common.fileio import write_json
    from common.outdir import MARKER

    run = tmp_path / "run"
    run.mkdir()
    write_json(run / MARKER, {"written_by": "bangla-tokfair", "command": "pretrain launch"})
    write_json(run / "config.json", _old_config(out=str(run), supervisor_args=["--halt-policy", "rollback"]))
    assert main(["launch", "--out", str(run), "--resume", "--dry-run", "--set", "supervisor.window=9"]) == 0
    assert "plan for tiny" in capsys.readouterr().out


def test_a_run_launched_with_relative_paths_evaluates_from_any_folder(micro, shards, sample_dir, tmp_path,
                                                                      monkeypatch, capsys):
    """Finding: the run recorded "data/shards", so `pretrain eval --run /abs/run` from another folder failed with
    "no manifest". And `eval --run RUN --text ... --out FILE` also rewrote RUN/eval.json and eval.png."""
    import shutil

    from pretrain.train.checkpoint import latest_checkpoint

    launched, elsewhere = tmp_path / "launched", tmp_path / "elsewhere"
    shutil.copytree(shards, launched / "data" / "shards")
    elsewhere.mkdir()
    monkeypatch.chdir(launched)
    assert main(micro.args(Path("data/shards"), Path("runs/r"), 2)) == 0
    run = launched / "runs" / "r"
    config = json.loads((run / "config.json").read_text())
    assert config["data"]["path"] == str(launched / "data" / "shards") and config["train"]["out"] == str(run)

    monkeypatch.chdir(elsewhere)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    report = elsewhere / "report.json"
    text = f"bn={sample_dir / 'bn' / 'literature-bnarchive.txt.gz'}"
    assert main(["eval", "--run", str(run), "--max-tokens", "64", "--samples", "0", "--text", text,
                 "--max-chars", "500", "--out", str(report)]) == 0
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before, "--out: RUN is left as it was"
    written = json.loads(report.read_text())
    assert written["step"] == 2 and set(written["languages"]) == {"bn", "en"} and "bn" in written["text"]["languages"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["report.json"]  # no plot beside it either
    assert main(["eval", "--run", str(run), "--max-tokens", "64", "--samples", "0"]) == 0  # without --out: RUN
    assert json.loads((run / "eval.json").read_text())["checkpoint"] == str(latest_checkpoint(run))
    assert (run / "eval.png").is_file()
    capsys.readouterr()
    assert main(["eval", "--run", str(run), "--samples", "0", "--out", str(report)]) == 2  # exists: --overwrite
    assert "--overwrite" in capsys.readouterr().err


def test_the_data_of_an_older_run_with_relative_paths_is_found():
    from pretrain.train.rundir import resolve_path

    # Launched from /home/u as `--data demo_out/corpus --out demo_out/run`: the launch folder is the run's
    # absolute path less the recorded --out.
    assert resolve_path("/home/u/demo_out/run", "demo_out/corpus", "demo_out/run") == Path("/home/u/demo_out/corpus")
    assert resolve_path("/home/u/demo_out/run", "/data/shards", "demo_out/run") == Path("/data/shards")
    # A run folder that was moved since: nothing to go by but the current folder.
    assert resolve_path("/elsewhere/run", "demo_out/corpus", "demo_out/run") == Path("demo_out/corpus")


def test_a_preflight_folder_is_launched_into_and_a_run_is_continued_only_with_resume(micro, synthetic_shards,
                                                                                     tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 2, "--preflight-only")) == 0
    assert main(micro.args(synthetic_shards, run, 2)) == 0  # the documented workflow: preflight, then train
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 4)) == 2
    assert "pass --resume" in capsys.readouterr().err
    assert main(micro.args(synthetic_shards, run, 4, "--resume", "--replan-schedule")) == 0
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 4
