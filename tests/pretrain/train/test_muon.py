"""Muon (`optim.name=muon`): which parameters it trains, the one schedule its groups share with AdamW's, the
combined state a checkpoint holds, the preflight (arbiter, memory) of a Muon run, and the refusal of a
checkpoint written with another optimizer."""

from __future__ import annotations

import json

import pytest
import torch

from pretrain.cli import main
from pretrain.config import apply_overrides, preset
from pretrain.guard.run_plan import checkpoint_bytes, optimizer_state_bytes
from pretrain.model.gpt import build_model, count_parameters, parameter_counts
from pretrain.train.optim import CombinedOptimizer, lr_at, make_optimizer, muon_momentum_at, set_rates

CPU = torch.device("cpu")


def tiny(*overrides: str):
    """`tiny` (tied embeddings) at 2 layers of width 64, for a 512-id vocabulary."""
    return apply_overrides(preset("tiny", 512), ["model.n_layer=2", "model.n_embd=64", *overrides])


def test_muon_trains_the_blocks_matrices_and_adamw_the_rest():
    cfg = tiny("optim.name=muon", "optim.muon_lr=0.05")
    model = build_model(cfg.model, 0)
    opt = make_optimizer(model, cfg.optim, CPU)
    assert isinstance(opt, CombinedOptimizer) and list(opt.parts) == ["adamw", "muon"]
    names = {id(p): n for n, p in model.named_parameters()}
    muon = [names[id(p)] for g in opt.parts["muon"].param_groups for p in g["params"]]
    assert muon == [f"blocks.{i}.{m}.weight" for i in range(2) for m in ("attn.qkv", "attn.proj", "mlp.gate_up",
                                                                           "mlp.down")]
    adamw = [[names[id(p)] for p in g["params"]] for g in opt.parts["adamw"].param_groups]
    # The tied embedding (also the head) once, with weight decay; the norms without.
    assert adamw[0] == ["tok_emb.weight"] and opt.parts["adamw"].param_groups[0]["weight_decay"] == 0.1
    assert sorted(adamw[1]) == sorted(n for n in names.values() if "norm" in n)
    assert opt.parts["adamw"].param_groups[1]["weight_decay"] == 0.0
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == count_parameters(cfg.model)
    assert sum(p.numel() for p in opt.parts["muon"].param_groups[0]["params"]) == parameter_counts(cfg.model).block_matrices
    # 4 bytes a value: one buffer for the matrices, two moments for the rest.
    assert optimizer_state_bytes(cfg) == 4 * (2 * count_parameters(cfg.model) - parameter_counts(cfg.model).block_matrices)


def test_every_group_follows_one_schedule_from_its_own_peak_and_momentum_warms_up():
    cfg = tiny("optim.name=muon", "optim.muon_lr=0.05", "optim.muon_momentum_warmup_steps=10")
    opt = make_optimizer(build_model(cfg.model, 0), cfg.optim, CPU)
    steps = cfg.train.max_steps
    for step in (0, 29, 30, 400, steps - 1):
        lr = set_rates(opt, step, cfg.optim, steps)
        assert lr == lr_at(step, cfg.optim, steps)
        assert [g["lr"] for g in opt.parts["adamw"].param_groups] == [lr, lr]  # exactly the schedule's
        assert opt.parts["muon"].param_groups[0]["lr"] == pytest.approx(lr * 0.05 / cfg.optim.lr)
    assert [muon_momentum_at(s, cfg.optim) for s in (0, 5, 10, 500)] == pytest.approx([0.85, 0.9, 0.95, 0.95])
    set_rates(opt, 5, cfg.optim, steps)
    assert opt.parts["muon"].param_groups[0]["momentum"] == pytest.approx(0.9)
    # AdamW alone is the plain torch optimizer, as before the registry.
    plain = make_optimizer(build_model(cfg.model, 0), tiny().optim, CPU)
    assert type(plain) is torch.optim.AdamW and len(plain.param_groups) == 2


def _steps(model, opt, cfg, steps: range) -> None:
    for step in steps:
        set_rates(opt, step, cfg.optim, cfg.train.max_steps)
        x = torch.randint(0, 512, (2, 33), generator=torch.Generator().manual_seed(step))
        _, loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_the_combined_state_round_trips_exactly(tmp_path):
    """Three steps, the state saved, two more; a fresh model and optimizer loaded from the save reach the same
    weights bit for bit. Without Muon's momentum buffers they would not."""
    cfg = tiny("optim.name=muon")
    model = build_model(cfg.model, 0)
    opt = make_optimizer(model, cfg.optim, CPU)
    _steps(model, opt, cfg, range(3))
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "state.pt")
    saved = torch.load(tmp_path / "state.pt", weights_only=True)  # as checkpoints are loaded
    assert set(saved["optimizer"]) == {"adamw", "muon"}
    assert all(set(s) == {"momentum_buffer"} for s in saved["optimizer"]["muon"]["state"].values())
    _steps(model, opt, cfg, range(3, 5))

    again = build_model(cfg.model, 1)
    again.load_state_dict(saved["model"])
    opt2 = make_optimizer(again, cfg.optim, CPU)
    opt2.load_state_dict(saved["optimizer"])
    _steps(again, opt2, cfg, range(3, 5))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))

    with pytest.raises(ValueError, match="holds parts adamw, this optimizer has adamw, muon"):
        opt2.load_state_dict({"adamw": saved["optimizer"]["adamw"]})


def test_a_muon_preflight_passes_the_arbiter_and_counts_one_buffer(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 4, "--optimizer", "muon", "--preflight-only")) == 0
    report = json.loads((run / "preflight.json").read_text())
    assert report["ok"] and report["arbiter"]["ok"] and report["arbiter"]["problems"] == []
    cfg = micro.config(synthetic_shards, run, "optim.name=muon")
    assert report["arbiter"]["checked"] == len(list(build_model(cfg.model, 0).parameters()))
    memory = report["memory"]
    assert memory["optimizer"] == "muon" and memory["optimizer_state_bytes"] == optimizer_state_bytes(cfg)
    adamw = micro.config(synthetic_shards, run)
    assert optimizer_state_bytes(cfg) < optimizer_state_bytes(adamw) == 8 * count_parameters(adamw.model)


def test_a_checkpoint_of_another_optimizer_is_refused_in_one_line(micro, synthetic_shards, tmp_path, capsys):
    first = tmp_path / "adamw"
    assert main(micro.args(synthetic_shards, first, 2)) == 0
    checkpoint = first / "checkpoints" / "step_00000002.pt"
    capsys.readouterr()
    code = main(micro.args(synthetic_shards, tmp_path / "muon", 4, "--optimizer", "muon", "--resume-from",
                           str(checkpoint)))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err == (f"pretrain: error: checkpoint {checkpoint} was trained with optimizer adamw, this run uses muon: "
                   "the optimizer states differ; continue it with --set optim.name=adamw, or start from a "
                   "checkpoint written with muon")


def test_a_muon_checkpoint_is_smaller_by_one_buffer_of_the_blocks_matrices(micro, synthetic_shards, tmp_path):
    """What the plan says of the checkpoint (`run_plan.checkpoint_bytes`), against the files: beside the
    weights and the optimizer state a checkpoint holds kilobytes (config, RNG, sampler, the groups' settings)."""
    sizes, planned = {}, {}
    for optimizer in ("adamw", "muon"):
        run = tmp_path / optimizer
        assert main(micro.args(synthetic_shards, run, 2, "--optimizer", optimizer)) == 0
        sizes[optimizer] = json.loads((run / "checkpoints" / "step_00000002.json").read_text())["bytes"]
        planned[optimizer] = checkpoint_bytes(micro.config(synthetic_shards, run, f"optim.name={optimizer}"))
        assert 0 < sizes[optimizer] - planned[optimizer] < 64 * 1024
    blocks = parameter_counts(micro.config(synthetic_shards, tmp_path).model).block_matrices
    assert planned["adamw"] - planned["muon"] == 4 * blocks
    assert sizes["adamw"] - sizes["muon"] == pytest.approx(4 * blocks, rel=0.02)


def test_fsdp_chosen_by_auto_is_refused_with_muon_before_the_model_is_built(micro, synthetic_shards, tmp_path,
                                                                           capsys, monkeypatch):
    """``train.fsdp=yes`` with Muon is refused with the config (tests/pretrain/test_contract.py); ``auto`` decides
    on the device, where it picks FSDP2 when DDP's replica would not fit: here two processes that would not."""
    from pretrain.train import distributed, trainer

    monkeypatch.setattr(distributed, "setup", lambda device, dtype: distributed.Runtime(CPU, None, world_size=2))
    monkeypatch.setattr(distributed, "use_fsdp", lambda fsdp, parameters, runtime: True)
    monkeypatch.setattr(trainer, "Trainer", lambda *args, **kwargs: pytest.fail("the trainer was built"))
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, tmp_path / "run", 4, "--optimizer", "muon")) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("pretrain: error: train.fsdp=auto chose FSDP2 (DDP's full replica would not fit on this device), "
                   "and optim.name=muon does not work with it: Muon orthogonalises whole matrices (Newton-Schulz) "
                   "and FSDP2 shards them; train with train.fsdp=no (DDP), or optim.name=adamw")
