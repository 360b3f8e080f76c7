"""Run configuration: one dataclass per concern (model, optimiser, data, training, supervisor), the named presets
(:data:`PRESETS`), the optimizers (:data:`OPTIMIZERS`) and the learning-rate schedules (:data:`SCHEDULES`): each
is the one table that validation, ``--help``, the command-line choices, the memory plan and the model card read,
so adding a preset, an optimizer or a schedule touches this file only.

A run is fully described by a :class:`RunConfig`; it is saved as ``RUN/config.json`` and inside every
checkpoint, and ``--resume`` reads it back, so a resumed run cannot silently change its shape or schedule.
Any field can be overridden from the command line with ``--set section.field=value``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import types
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from common import cli
from common.errors import InputError
from pretrain.model.gpt import GPTConfig, pad_vocab, parameter_counts

ModelConfig = GPTConfig


@dataclass
class OptimConfig:
    """The optimizer (one of :data:`OPTIMIZERS`) and the learning-rate schedule: linear warmup, then one of
    :data:`SCHEDULES`. ``lr`` and the AdamW fields are AdamW's, which trains every parameter under ``adamw`` and
    the embeddings, the head and the norms under ``muon``; the ``muon_`` fields are Muon's, on the 2-D matrices
    inside the blocks. Every group follows the same schedule: its rate at a step is its own peak (``lr`` or
    ``muon_lr``) times the schedule's multiplier of that step."""

    name: str = "adamw"  # a name in OPTIMIZERS
    lr: float = 3e-4
    min_lr_ratio: float = 0.1  # the schedule ends at lr * min_lr_ratio
    warmup_steps: int = 700
    schedule: str = "cosine"  # a name in SCHEDULES
    decay_fraction: float = 0.2  # wsd: the last fraction of max_steps decays linearly to the minimum
    weight_decay: float = 0.1  # on matrices only; norms are not decayed
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # max global gradient norm; 0 disables clipping
    # Set by a --resume with --replan-schedule: from update replan_step on, the schedule goes on from the rate
    # replan_lr it had there down to the floor at the new max_steps (pretrain.train.optim.lr_at). 0: never.
    replan_step: int = 0
    replan_lr: float = 0.0
    # Re-planned inside the warmup: the warmup goes on from replan_lr up to the peak at this update (the new
    # length's warmup), then the schedule decays as usual. 0: no warmup left (the decay starts at replan_lr).
    replan_warmup: int = 0
    # Muon (torch.optim.Muon) on the blocks' matrices under name "muon"; ignored by "adamw".
    muon_lr: float = 0.02  # peak rate of the Muon group (modded-nanogpt's and Keller Jordan's 0.02)
    muon_momentum: float = 0.95  # momentum after its warmup
    muon_momentum_start: float = 0.85  # momentum of update 0, rising linearly to muon_momentum...
    muon_momentum_warmup_steps: int = 300  # ...over this many updates (modded-nanogpt's 300); 0: constant
    muon_nesterov: bool = True  # Nesterov momentum: orthogonalise grad + momentum * buffer, not the buffer
    muon_ns_steps: int = 5  # Newton-Schulz iterations of the orthogonalisation
    muon_weight_decay: float = 0.0  # decoupled, applied as p *= 1 - rate * muon_weight_decay
    # torch.optim.Muon's adjust_lr_fn: "original" scales a matrix's rate by sqrt(max(1, rows / columns))
    # (Keller Jordan's, for muon_lr ~0.02); "match_rms_adamw" by 0.2 * sqrt(max(rows, columns)), so that the
    # update's RMS matches AdamW's and AdamW's rate and weight decay carry over (Moonshot's).
    muon_adjust_lr_fn: str = "original"

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise InputError(f"optim.name must be one of {', '.join(OPTIMIZERS)}, got {self.name!r}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"optim.schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")


@dataclass(frozen=True)
class Schedule:
    """A learning-rate decay after the linear warmup. ``lr(step, optim, max_steps)`` is the rate of update
    ``step`` (0-based, past the warmup), reaching ``lr * min_lr_ratio`` at the last update; ``describe(optim)``
    is how the model card says it, ``help`` how ``--help`` does."""

    help: str
    lr: Callable[[int, OptimConfig, int], float]
    describe: Callable[[OptimConfig], str]


def _cosine(step: int, o: OptimConfig, max_steps: int) -> float:
    peak, floor = o.lr, o.lr * o.min_lr_ratio
    progress = min((step - o.warmup_steps) / max(max_steps - 1 - o.warmup_steps, 1), 1.0)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))


def _wsd(step: int, o: OptimConfig, max_steps: int) -> float:
    peak, floor = o.lr, o.lr * o.min_lr_ratio
    # The decay starts by update max_steps - 2 at the latest, so that even a short run ends at the floor.
    decay_start = max(o.warmup_steps, min(int(max_steps * (1 - o.decay_fraction)), max_steps - 2))
    if step < decay_start:
        return peak
    progress = (step - decay_start) / max(max_steps - 1 - decay_start, 1)
    return peak - (peak - floor) * min(progress, 1.0)


SCHEDULES: dict[str, Schedule] = {
    "cosine": Schedule("cosine down to lr * min_lr_ratio", _cosine,
                       lambda o: f"cosine decay to {o.lr * o.min_lr_ratio:g}"),
    "wsd": Schedule("warmup-stable-decay: constant, then linear down over the last decay_fraction of the steps",
                    _wsd, lambda o: f"constant, and a linear decay to {o.lr * o.min_lr_ratio:g} over the last "
                                    f"{o.decay_fraction:.0%} of the steps (WSD)"),
}


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer of :data:`OPTIMIZERS`. ``build(model, optim, device)`` returns its parts: named torch
    optimizers over disjoint sets of the model's trainable parameters, covering all of them, each part's
    param groups created at their peak rate (`pretrain.train.optim.make_optimizer` steps them as one and the
    schedule scales each group from that peak). ``state_floats(model)`` is how many fp32 values of state it
    keeps for a model of that shape (the memory plan, the checkpoint size); ``step_bytes(model, fused)`` the
    temporaries its step allocates besides (``fused``: on CUDA). ``describe(optim)`` is how the model card says
    it, ``help`` how ``--help`` does. ``not_fsdp``: why it does not work on FSDP2's sharded parameters and what
    to do instead (an update that needs whole matrices), refused in those words; empty where it works."""

    help: str
    build: Callable[[torch.nn.Module, OptimConfig, torch.device], dict[str, torch.optim.Optimizer]]
    state_floats: Callable[[GPTConfig], int]
    step_bytes: Callable[[GPTConfig, bool], int]
    describe: Callable[[OptimConfig], str]
    not_fsdp: str = ""


def _adamw_part(params: list[torch.nn.Parameter], o: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW over ``params`` with weight decay on matrices only; fused on CUDA."""
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": o.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps,
                             fused=device.type == "cuda" or None)


def _trainable(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """The trainable parameters by name, a shared (tied) tensor once."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def muon_trains(name: str, p: torch.nn.Parameter) -> bool:
    """Whether Muon trains parameter ``name``: the 2-D weight matrices inside the blocks. The embedding and
    the head are not hidden matrices (a lookup table, and the map to logits), and norms are vectors."""
    return name.startswith("blocks.") and p.dim() == 2


def _muon(model: torch.nn.Module, o: OptimConfig, device: torch.device) -> dict[str, torch.optim.Optimizer]:
    named = _trainable(model)
    matrices = [p for n, p in named if muon_trains(n, p)]
    rest = [p for n, p in named if not muon_trains(n, p)]
    muon = torch.optim.Muon(matrices, lr=o.muon_lr, weight_decay=o.muon_weight_decay, momentum=o.muon_momentum,
                            nesterov=o.muon_nesterov, ns_steps=o.muon_ns_steps, adjust_lr_fn=o.muon_adjust_lr_fn)
    return {"adamw": _adamw_part(rest, o, device), "muon": muon}


def _muon_state_floats(m: GPTConfig) -> int:
    """One momentum buffer for the blocks' matrices, AdamW's two moments for the rest."""
    c = parameter_counts(m)
    return c.block_matrices + 2 * (c.total - c.block_matrices)


def _muon_step_bytes(m: GPTConfig, fused: bool) -> int:
    """One matrix's temporaries at a time (the largest: qkv or gate_up): the Nesterov update in fp32 and the
    Newton-Schulz iterates in bf16, about 10 bytes an element; and the unfused AdamW's sqrt(v) of the rest."""
    c = parameter_counts(m)
    largest = max(3 * m.n_embd, 2 * m.ffn_hidden) * m.n_embd
    return 10 * largest + (0 if fused else 4 * (c.total - c.block_matrices))


def _adamw_settings(o: OptimConfig) -> str:
    return f"betas {o.beta1}, {o.beta2}; weight decay {o.weight_decay} on matrices"


def _describe_muon(o: OptimConfig) -> str:
    momentum = (f"momentum {o.muon_momentum_start} rising to {o.muon_momentum} over "
                f"{o.muon_momentum_warmup_steps} steps" if o.muon_momentum_warmup_steps else f"momentum {o.muon_momentum}")
    return (f"Muon (lr {o.muon_lr:g}, {momentum}, {'Nesterov, ' if o.muon_nesterov else ''}{o.muon_ns_steps} "
            f"Newton-Schulz steps, weight decay {o.muon_weight_decay}, adjust_lr_fn {o.muon_adjust_lr_fn}) on the "
            f"blocks' matrices; AdamW (lr {o.lr:g}, {_adamw_settings(o)}) on the embeddings, head and norms")


OPTIMIZERS: dict[str, OptimizerSpec] = {
    # Unfused AdamW (CPU) builds sqrt(v) for every parameter, 4 bytes each; the fused one (CUDA) none.
    "adamw": OptimizerSpec(
        help="AdamW on every parameter (two fp32 moments each)",
        build=lambda model, o, device: {"adamw": _adamw_part([p for _, p in _trainable(model)], o, device)},
        state_floats=lambda m: 2 * parameter_counts(m).total,
        step_bytes=lambda m, fused: 0 if fused else 4 * parameter_counts(m).total,
        describe=lambda o: f"AdamW ({_adamw_settings(o)})"),
    "muon": OptimizerSpec(
        help="Muon (torch.optim.Muon, one momentum buffer) on the 2-D matrices inside the blocks, AdamW on the "
             "embeddings, head and norms; not with FSDP2",
        build=_muon,
        state_floats=_muon_state_floats,
        step_bytes=_muon_step_bytes,
        describe=_describe_muon,
        not_fsdp="Muon orthogonalises whole matrices (Newton-Schulz) and FSDP2 shards them; train with "
                 "train.fsdp=no (DDP), or optim.name=adamw"),
}


@dataclass
class DataConfig:
    """Where the shards are and how they are cut into sequences."""

    path: str = ""  # directory with manifest.json and the .bin shards
    micro_batch: int = 16  # sequences per device per forward/backward
    seq_len: int = 0  # 0 = the model's context length
    tokenizer: str = ""  # optional: a tokenizer file or sha256 the manifest must match
    eval_tokens: int = 65536  # per language, for the periodic validation during training


@dataclass
class TrainConfig:
    """The loop: batch in tokens, length, logging, checkpoints, device and fault injection."""

    out: str = ""
    global_batch_tokens: int = 524288  # tokens per optimizer step, whatever the world size
    # Tokens to train on; with max_steps 0 the step count is derived from it (ceil(budget / batch)), so the
    # learning-rate schedule ends at the budget's last step.
    token_budget: float = 0.0
    max_steps: int = 15000  # 0: from token_budget, else (with a time budget) from the preflight's step time
    time_budget_s: float = 0.0  # stop (and checkpoint) after this many seconds; 0 = no limit
    eval_interval: int = 500
    checkpoint_interval: int = 500
    keep_last: int = 3  # step checkpoints kept besides the best
    # Steps between progress reports (the bar's figures on a terminal, else a plain line) and TensorBoard points,
    # besides the first and the last step; metrics.jsonl always gets every step.
    log_interval: int = 10
    seed: int = 1337
    device: str = "auto"  # "auto" | "cpu" | "cuda" | "cuda:N"
    dtype: str = "auto"  # "auto" (bf16 on CUDA, fp32 on CPU) | "bf16" | "fp32"
    compile: str = "auto"  # "auto" (on CUDA) | "yes" | "no"
    fsdp: str = "auto"  # under torchrun: "auto" (FSDP2 when DDP would not fit) | "yes" | "no"
    threads: int = 0  # torch CPU threads; 0 = pretrain.train.hardware.cpu_threads (the usable cores less one)
    tensorboard: bool = True
    preflight_steps: int = 3  # measured optimizer steps in the preflight burst; 0 skips the burst
    supervisor: bool = True  # start the supervisor process (its settings are the supervisor section)
    # Wait after each step until the supervisor has judged it: every verdict then lands at the step it names
    # (deterministic; what the fault tests use), at the cost of up to one supervisor poll per step.
    supervisor_lockstep: bool = False
    inject_faults: list[str] = field(default_factory=list)  # "KIND@STEP", see pretrain.train.faults


@dataclass
class SupervisorConfig:
    """The supervisor's thresholds and policy (`pretrain.guard.supervisor` reads them from RUN/config.json).
    Defaults suit a real run; tests shrink the windows and timeouts."""

    window: int = 100  # steps of history the spike and explosion tests compare the newest steps against
    min_history: int = 20  # no spike, explosion or collapse verdict before this many steps of history
    # A loss is an outlier at spike_factor x the median loss of the window before it, and only spike_patience
    # outliers in a row are a verdict (LLM Foundry's KillLossSpike: 2x, a streak of 5); the same streak
    # length applies to the gradient norm. Single outliers come and go in healthy small-batch runs.
    spike_factor: float = 2.0
    spike_patience: int = 5
    # 25x: a 13x excursion was seen at step 46 of a healthy tiny run with 1,024-token batches (benchmarks/results/2026-11-30-pretrain-cpu-acceptance).
    grad_explode_factor: float = 25.0  # grad norm above this multiple of the window's median, spike_patience steps
    grad_norm_max: float | None = None  # optional absolute ceiling on the grad norm
    throughput_fraction: float = 0.3  # tokens/s below this fraction of the run's own median...
    throughput_patience: int = 5  # ...for this many consecutive steps
    throughput_warmup: int = 5  # first steps left out of the median (compilation, cold caches)
    heartbeat_timeout_s: float = 600.0  # end a trainer silent for this long
    poll_s: float = 2.0  # between looks at the run directory
    grace_s: float = 30.0  # between SIGTERM and SIGKILL for a stalled trainer
    halt_policy: str = "halt"  # or "rollback": to the last good checkpoint, skipping the bad batches
    max_rollbacks: int = 3  # rollbacks asked (and honoured by the trainer) before halting instead
    rollback_skip_before: int = 0  # also skip this many batches before the offending step

    def __post_init__(self) -> None:
        if self.halt_policy not in ("halt", "rollback"):
            raise ValueError(f"halt_policy must be 'halt' or 'rollback', got {self.halt_policy!r}")
        for name in ("window", "min_history", "throughput_patience", "spike_patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.throughput_fraction < 1:
            raise ValueError(f"throughput_fraction must be in (0, 1), got {self.throughput_fraction}")


# Fields a --resume may change: how the run is driven, not what it computes (and the whole supervisor section).
# train.max_steps is refused by the trainer unless --replan-schedule re-plans the schedule from the resumed step.
RESUMABLE_KEYS = {"train.max_steps", "train.keep_last", "train.time_budget_s", "train.supervisor",
                  "train.inject_faults", "train.device", "train.threads",
                  "train.preflight_steps", "train.tensorboard", "train.log_interval", "train.compile",
                  "train.supervisor_lockstep", "data.path", "data.tokenizer", "train.out"}


@dataclass
class RunConfig:
    model_preset: str
    model: GPTConfig
    optim: OptimConfig
    data: DataConfig
    train: TrainConfig
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "config") -> RunConfig:
        """The config in ``raw`` (a config.json's content); ``where`` names it in errors (a file, a checkpoint).
        A missing section or field, an unknown field or a value of the wrong kind is an :class:`InputError`."""
        if not isinstance(raw, dict) or "model_preset" not in raw:
            raise InputError(f"{where}: not a run config (expected an object with model_preset, model, optim, "
                             "data, train and supervisor, as in a RUN/config.json)")
        raw = _upgrade(raw, where)
        sections = {}
        for name, kind in SECTIONS.items():
            values = raw.get(name)
            if not isinstance(values, dict):
                raise InputError(f"{where}: section {name!r} is missing or not an object")
            unknown = set(values) - {f.name for f in dataclasses.fields(kind)}
            if unknown:
                raise InputError(f"{where}: {name} has no field {sorted(unknown)[0]!r}; known: "
                                 f"{', '.join(f.name for f in dataclasses.fields(kind))}")
            try:
                sections[name] = kind(**values)
            except (TypeError, ValueError) as e:  # a missing field, or the model's own shape checks
                raise InputError(f"{where}: {name}: {e}") from None
        cfg = cls(model_preset=raw["model_preset"], **sections)
        check_fields(cfg, where)
        return cfg

    @property
    def seq_len(self) -> int:
        return self.data.seq_len or self.model.block_size


SECTIONS = {"model": GPTConfig, "optim": OptimConfig, "data": DataConfig, "train": TrainConfig,
            "supervisor": SupervisorConfig}


# Settings of the single-step loss z-test the sustained-divergence rule replaced: a config that still names them
# (a run being resumed) is read without them, since nothing reads them any more.
RETIRED_SUPERVISOR_FIELDS = frozenset({"spike_z", "spike_std_floor"})


def _upgrade(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """A config of a version before the supervisor section (a RUN/config.json or a checkpoint's) in today's
    shape: its ``train.max_rollbacks`` and ``train.supervisor_args`` (the supervisor's own ``--NAME VALUE``
    options, as ``--sup-NAME`` forwarded them) become supervisor fields."""
    train = raw.get("train")
    if isinstance(raw.get("supervisor"), dict) and RETIRED_SUPERVISOR_FIELDS & set(raw["supervisor"]):
        supervisor = {k: v for k, v in raw["supervisor"].items() if k not in RETIRED_SUPERVISOR_FIELDS}
        raw = {**raw, "supervisor": supervisor}
    if "supervisor" in raw or not isinstance(train, dict):
        return raw
    train = dict(train)
    values: dict[str, Any] = {}
    if "max_rollbacks" in train:
        values["max_rollbacks"] = train.pop("max_rollbacks")
    hints = typing.get_type_hints(SupervisorConfig)
    args = list(train.pop("supervisor_args", None) or [])
    while args:
        option = str(args.pop(0))
        name, eq, value = option.removeprefix("--").replace("-", "_").partition("=")
        if name in RETIRED_SUPERVISOR_FIELDS and (eq or args):
            if not eq:
                args.pop(0)
            continue
        if not option.startswith("--") or name not in hints or not (eq or args):
            raise InputError(f"{where}: train.supervisor_args: {option!r} is not a supervisor option with a value; "
                             f"known: {', '.join('--' + n.replace('_', '-') for n in hints)}")
        try:
            values[name] = _coerce(value if eq else str(args.pop(0)), hints[name], f"supervisor.{name}")
        except InputError as e:
            raise InputError(f"{where}: train.supervisor_args: {e}") from None
    return {**raw, "train": train, "supervisor": values}


@dataclass(frozen=True)
class Preset:
    """A named run: the model's shape (the vocabulary always comes from the data) and the optimiser, data and
    training fields that differ from the defaults."""

    model: dict[str, Any]
    optim: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    # ~0.41B parameters with a 50k vocabulary (0.44B with 64k): docs/pretrain.md, Presets, has the count.
    # 2e9 tokens (about 5 tokens per parameter) in 3815 steps of 512 Ki tokens; the decay ends at step 3815.
    "bangla-0.4b": Preset(
        model=dict(n_layer=24, n_head=16, n_embd=1024, block_size=2048),
        # The recipe measured by benchmarks/bench_recipe.py (docs/pretrain.md, Recipe): Muon on the blocks'
        # matrices at the large CPU size's optimum (width-independent rule), AdamW for embeddings, head and norms
        # at that size's optimum 4e-3 scaled by 1/width (128/1024), and WSD, which beat cosine on Muon.
        optim=dict(name="muon", muon_lr=5e-3, lr=5e-4, schedule="wsd", warmup_steps=200),
        data=dict(micro_batch=16, eval_tokens=262144),
        train=dict(global_batch_tokens=524288, token_budget=2e9, max_steps=0, eval_interval=250,
                   checkpoint_interval=250),
    ),
    # Trains on a laptop CPU in minutes; tied embeddings keep the 50k-vocabulary tables from dominating.
    # 900 steps of 1,024 tokens, lr 2e-3 after 30 warmup steps, cosine to 0: with 64,000 ids and 4M tokens of
    # ../shared/data its validation loss ends 0.30 / 0.84 nats below a unigram model of its training tokens
    # (bn / en), where 600 steps at 4e-3 ended 0.15 / 0.69, at 2e-3 0.24-0.26 (benchmarks/tiny_vs_unigram.py,
    # benchmarks/results/2026-12-01-tiny-budget). At 4e-3 the loss sat on a plateau until the decay began; 1e-3 learned slower. Small
    # batches: on a CPU, more updates beat bigger batches at this scale. 30 warmup steps: with 10, a
    # 64,000-id vocabulary's loss jumped from 10.0 to 10.8 right after the warmup.
    "tiny": Preset(
        model=dict(n_layer=4, n_head=4, n_embd=128, block_size=128, tie_embeddings=True),
        optim=dict(lr=2e-3, warmup_steps=30, min_lr_ratio=0.0),
        data=dict(micro_batch=8, eval_tokens=16384),
        train=dict(global_batch_tokens=1024, max_steps=900, eval_interval=200, checkpoint_interval=200),
    ),
}


def check_preset(name: str, what: str = "--config") -> Preset:
    """The preset ``name``, else an :class:`InputError` naming ``what`` and the presets there are."""
    if name not in PRESETS:
        raise InputError(f"{what} {name!r}: no such preset or .json file; presets: {', '.join(PRESETS)}")
    return PRESETS[name]


def model_config(name: str, vocab_size: int, **overrides) -> GPTConfig:
    """The shape of preset ``name`` for a tokenizer of ``vocab_size`` ids (padded up to a multiple of 128)."""
    return GPTConfig(vocab_size=pad_vocab(vocab_size), real_vocab_size=vocab_size,
                     **{**check_preset(name, "model preset").model, **overrides})


def load_config(path: str | os.PathLike) -> RunConfig:
    """A config JSON file (e.g. a RUN/config.json); errors name the file, and the line and column of bad JSON."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
    return RunConfig.from_dict(raw, str(path))


# The range of every numeric field, as the command line's number types (common.cli) check it: a value outside
# it is refused before any work, naming the field (train.eval_interval=0 would divide by zero at step 1).
FIELD_TYPES: dict[str, Any] = {
    **{f"model.{k}": cli.positive_int for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")},
    "optim.lr": cli.positive_float, "optim.min_lr_ratio": cli.share, "optim.warmup_steps": cli.non_negative_int,
    "optim.decay_fraction": cli.share, "optim.weight_decay": cli.non_negative_float, "optim.beta1": cli.share,
    "optim.beta2": cli.share, "optim.eps": cli.positive_float, "optim.grad_clip": cli.non_negative_float,
    "optim.replan_step": cli.non_negative_int, "optim.replan_lr": cli.non_negative_float,
    "optim.replan_warmup": cli.non_negative_int,
    "optim.muon_lr": cli.positive_float, "optim.muon_momentum": cli.share, "optim.muon_momentum_start": cli.share,
    "optim.muon_momentum_warmup_steps": cli.non_negative_int, "optim.muon_ns_steps": cli.positive_int,
    "optim.muon_weight_decay": cli.non_negative_float,
    "data.micro_batch": cli.positive_int, "data.seq_len": cli.non_negative_int,
    "data.eval_tokens": cli.non_negative_int, "train.global_batch_tokens": cli.positive_int,
    "train.token_budget": cli.non_negative_float, "train.max_steps": cli.non_negative_int,
    "train.time_budget_s": cli.non_negative_float, "train.eval_interval": cli.positive_int,
    "train.checkpoint_interval": cli.positive_int, "train.keep_last": cli.positive_int,
    "train.log_interval": cli.positive_int, "train.seed": cli.non_negative_int,
    "train.threads": cli.non_negative_int, "train.preflight_steps": cli.non_negative_int,
    **{f"supervisor.{k}": cli.positive_int for k in ("window", "min_history", "throughput_patience",
                                                      "spike_patience")},
    **{f"supervisor.{k}": cli.non_negative_int for k in ("throughput_warmup", "max_rollbacks", "rollback_skip_before")},
    **{f"supervisor.{k}": cli.non_negative_float for k in ("spike_factor", "grad_explode_factor",
                                                            "grad_norm_max", "heartbeat_timeout_s", "poll_s", "grace_s")},
    "supervisor.throughput_fraction": cli.fraction,
}
FIELD_CHOICES = {"optim.name": OPTIMIZERS, "optim.schedule": SCHEDULES,
                 "optim.muon_adjust_lr_fn": ("original", "match_rms_adamw"), "train.dtype": ("auto", "bf16", "fp32"),
                 "train.compile": ("auto", "yes", "no"), "train.fsdp": ("auto", "yes", "no"),
                 "supervisor.halt_policy": ("halt", "rollback")}


def check_fields(cfg: RunConfig, where: str) -> None:
    """Refuse a field outside its range (:data:`FIELD_TYPES`, :data:`FIELD_CHOICES`), naming ``where`` and it."""
    for key, parse in FIELD_TYPES.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value is None:  # an optional field left unset (supervisor.grad_norm_max)
            continue
        try:
            if isinstance(value, bool):
                raise argparse.ArgumentTypeError(f"expected {parse.__name__}, got {value}")
            parse(str(value))
        except argparse.ArgumentTypeError as e:
            raise InputError(f"{where}: {key}: {e}") from None
    for key, choices in FIELD_CHOICES.items():
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value not in choices:
            raise InputError(f"{where}: {key}: expected one of {', '.join(choices)}, got {value!r}")
    if cfg.optim.muon_ns_steps >= 100:
        raise InputError(f"{where}: optim.muon_ns_steps: expected fewer than 100 (torch.optim.Muon's limit), got "
                         f"{cfg.optim.muon_ns_steps}")
    if cfg.train.fsdp == "yes" and OPTIMIZERS[cfg.optim.name].not_fsdp:
        raise InputError(f"{where}: optim.name={cfg.optim.name} with train.fsdp=yes: "
                         f"{OPTIMIZERS[cfg.optim.name].not_fsdp}")


def preset(name: str, vocab_size: int) -> RunConfig:
    """The named preset for a tokenizer of ``vocab_size`` ids."""
    p = check_preset(name)
    cfg = RunConfig(model_preset=name, model=model_config(name, vocab_size), optim=OptimConfig(**p.optim),
                    data=DataConfig(**p.data), train=TrainConfig(**p.train))
    return derive_steps(cfg)


def derive_steps(cfg: RunConfig) -> RunConfig:
    """max_steps from the token budget where the config gives a budget and no step count."""
    tc = cfg.train
    if tc.token_budget < 0:
        raise InputError(f"train.token_budget must be >= 0, got {tc.token_budget}")
    if not tc.max_steps and tc.token_budget:
        tc.max_steps = math.ceil(tc.token_budget / tc.global_batch_tokens)
    return cfg


def effective_warmup(optim: OptimConfig, max_steps: int) -> int:
    """The warmup a run of ``max_steps`` updates gets: ``optim.warmup_steps``, unless that would reach the last
    update. The schedule must reach its peak and end at its floor at the last update, so the decay needs the
    warmup to end by update ``max_steps - 2`` (warmup 3 over 4 steps gave 0.333, 0.667, 1.0, 1.0 of the peak,
    never the floor). Such a warmup becomes a fifth of the steps (at least 1), as a run sized by its time
    budget gets (`pretrain.guard.preflight`): `tiny`'s 30 over 20 steps become 4. The config keeps what was
    asked; the learning rate (`pretrain.train.optim.lr_at`), the plan and the model card use this."""
    if max_steps and optim.warmup_steps > max_steps - 2:
        return min(max(max_steps // 5, 1), max(max_steps - 2, 0))
    return optim.warmup_steps


def _coerce(value: str, annotation: Any, key: str) -> Any:
    """Parse a command-line string into the field's declared type."""
    origin = typing.get_origin(annotation)
    if origin is list:
        return [v for v in value.split(",") if v]
    if origin in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    try:
        if annotation is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        return annotation(value)
    except ValueError:
        raise InputError(f"--set {key}={value}: expected a {getattr(annotation, '__name__', annotation)}") from None


def apply_overrides(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """Apply ``section.field=value`` strings (sections: :data:`SECTIONS`); unknown keys are errors."""
    for item in overrides:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot:
            raise InputError(f"--set {item!r}: expected section.field=value, e.g. train.max_steps=100")
        target = getattr(cfg, section, None)
        if target is None or not dataclasses.is_dataclass(target):
            raise InputError(f"--set {item!r}: unknown section {section!r}; known: {', '.join(SECTIONS)}")
        hints = typing.get_type_hints(type(target))
        if name not in hints:
            raise InputError(f"--set {item!r}: {section} has no field {name!r}; known: {', '.join(hints)}")
        setattr(target, name, _coerce(value, hints[name], key))
    # Re-run validation (and derived defaults such as the SwiGLU width) on the edited sections.
    where = "--set" if overrides else "config"
    try:
        cfg.model = GPTConfig(**{**asdict(cfg.model), **({"ffn_hidden": 0} if _shape_changed(cfg, overrides) else {})})
    except ValueError as e:  # the model's own shape checks (heads dividing the width, ...)
        raise InputError(f"{where}: model: {e}") from None
    cfg.optim = OptimConfig(**asdict(cfg.optim))
    check_fields(cfg, where)
    keys = {o.partition("=")[0] for o in overrides}
    if keys & {"train.token_budget", "train.global_batch_tokens"} and "train.max_steps" not in keys \
            and cfg.train.token_budget:
        cfg.train.max_steps = 0  # a new budget or batch: the steps follow the budget again
    return derive_steps(cfg)


def _shape_changed(cfg: RunConfig, overrides: list[str]) -> bool:
    """Whether n_embd changed without an explicit ffn_hidden, so the SwiGLU width must be derived again."""
    keys = {o.partition("=")[0] for o in overrides}
    return "model.n_embd" in keys and "model.ffn_hidden" not in keys


__all__ = ["OPTIMIZERS", "PRESETS", "SCHEDULES", "DataConfig", "GPTConfig", "ModelConfig", "OptimConfig", "OptimizerSpec",
           "RunConfig", "SupervisorConfig", "TrainConfig", "apply_overrides", "check_fields", "load_config", "preset"]
