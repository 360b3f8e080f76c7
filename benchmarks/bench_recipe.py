"""Which training recipe for the 0.4B: AdamW against Muon (and recipe candidates on Muon) at two small sizes on
CPU, several seeds, held-out bits per byte per language against tokens seen (issue 31).

    python benchmarks/bench_recipe.py --data ../shared/data --out benchmarks/results/2026-12-02-recipe --jobs 2
    python benchmarks/bench_recipe.py --data ../shared/data --out OUT --quick      (a minute: the pipeline only)

Data, the same for every run: an ``--vocab-size`` tokenizer trained by ``tokenizers-train`` with its defaults
on the first ``--max-chars`` characters of each Bangla and English file (`bench_model`'s files: Bangla blog,
poems and literature, English wiki), shards from the same characters by ``corpus build`` (`bench_model`'s
50/50 mixture), and held-out text per language that neither saw (`bench_model.write_heldout`: the documents
of the language's largest file after those characters).

Runs: ``pretrain``'s `tiny` preset (tied embeddings, context 128, 1,024-token batches) at two sizes
(:data:`SIZES`; the second has at least 4x the first's non-embedding parameters), ``--steps`` updates each,
one torch thread per run and ``--jobs`` runs at a time, through the project's own trainer
(`pretrain.train.trainer.Trainer`), so every optimizer, schedule and switch is the one ``pretrain launch``
runs. Every ``--eval-every`` steps the model's held-out bits per byte per language are measured by
`pretrain.eval.text_bits` (what ``pretrain eval --text`` reports). The phases, each one's choices read from
the results before it:

1. AdamW swept over :data:`ADAMW_LRS` at each size (seed 0);
2. Muon swept over :data:`MUON_LRS` (:data:`LARGE_MUON_LRS` at the large size; ``optim.muon_lr``, the block
   matrices) with the size's best AdamW
   ``optim.lr`` for the embeddings and norms; AdamW's best rate for seeds 1 and 2;
3. Muon's best rate for seeds 1 and 2, and each of :data:`CANDIDATES` on Muon at the small size (seeds 0 and
   1: :data:`CANDIDATE_SEEDS`);
4. the recipe (Muon plus every candidate that won at the small size) at both sizes, 3 seeds: nothing new to
   run where no candidate won, since the recipe is then Muon's runs themselves.

A "best" rate has the lowest final bits per byte averaged over the languages. A candidate wins if its final
bits per byte, paired seed by seed with Muon's, is lower by more than the paired differences' standard
deviation in every language. Figures (per size and language): the tokens the recipe's seed-mean curve takes to
reach AdamW's seed-mean final bits per byte (linearly interpolated between evaluations) over AdamW's tokens,
the final gap (recipe - AdamW, paired by seed: mean ± std) and the median ms per step. The transfer rule is
checked on the two sizes (:func:`transfer_check`).

Each run's result is written to ``OUT/runs/done/NAME.json`` (atomically) as it finishes; the same command after
an interruption runs only what is missing. The tokenizer, shards, held-out text and run folders are kept in
``OUT/runs/`` too (no result: git ignores ``runs/``). ``OUT`` gets ``results.json`` (every run and the
figures), ``results.md`` (the tables) and ``recipe.png`` (bits per byte against tokens, seed mean ± std).
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import bench_model

from common import cli
from common.fileio import atomic_write_text, read_json, write_json

ADAMW_LRS = (0.002, 0.004, 0.008, 0.016, 0.032)
MUON_LRS = (0.0025, 0.005, 0.01, 0.02)
# The large size's Muon sweep (its own name, so that it can be narrowed where time is short): the same four.
# Started as the upper three, it had its optimum at the lowest (0.005), so 0.0025 went back in.
LARGE_MUON_LRS = MUON_LRS
SEEDS = (0, 1, 2)
# Each candidate's overrides, applied on top of Muon at its best rate.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "wsd": ("optim.schedule=wsd",),
    "qk_norm": ("model.qk_norm=true",),
    "z_loss": ("model.z_loss=1e-4",),  # PaLM's coefficient
    "softcap": ("model.logit_softcap=15",),  # modded-nanogpt's / nanochat's cap
}
LANGS = ("bn", "en")
CANDIDATE_SEEDS = 2  # seeds per candidate: the first two of the run's (2 CPU cores shared, in the time there was)


@dataclass(frozen=True)
class Size:
    """A model shape: the `tiny` preset's, at this width and depth (32-wide heads)."""

    name: str
    n_embd: int
    n_layer: int

    def overrides(self) -> tuple[str, ...]:
        return (f"model.n_embd={self.n_embd}", f"model.n_layer={self.n_layer}", f"model.n_head={self.n_embd // 32}")


SIZES = (Size("d64x4", 64, 4), Size("d128x5", 128, 5))


@dataclass(frozen=True)
class Spec:
    """One training run. ``lr`` is AdamW's (every parameter with adamw; embeddings and norms with muon),
    ``muon_lr`` Muon's (the block matrices), ``extra`` the candidates' overrides."""

    size: Size
    optimizer: str  # "adamw" | "muon"
    lr: float
    seed: int
    muon_lr: float = 0.0
    extra: tuple[str, ...] = ()
    label: str = ""  # the candidates' names, "+"-joined

    @property
    def name(self) -> str:
        rates = f"lr{self.lr:g}" + (f"-mlr{self.muon_lr:g}" if self.optimizer == "muon" else "")
        return "-".join(x for x in (self.size.name, self.optimizer, rates, self.label, f"s{self.seed}") if x)

    def overrides(self) -> list[str]:
        opt = [f"optim.lr={self.lr}"]
        if self.optimizer == "muon":
            opt += ["optim.name=muon", f"optim.muon_lr={self.muon_lr}"]
        return [*self.size.overrides(), *opt, f"train.seed={self.seed}", *self.extra]


@dataclass
class Settings:
    """What every run shares."""

    shards: Path
    heldout: dict[str, Path]
    work: Path
    steps: int
    eval_every: int
    heldout_chars: int


@dataclass
class RunResult:
    """A finished run: bits per byte per language at each evaluation (``tokens`` seen then)."""

    name: str
    spec: dict[str, Any]
    non_embedding: int
    steps: int
    tokens: list[int] = field(default_factory=list)
    bpb: dict[str, list[float]] = field(default_factory=dict)
    ms_per_step: float = 0.0  # median over the updates (evaluation excluded)
    wall_s: float = 0.0

    def final(self, lang: str) -> float:
        return self.bpb[lang][-1]


# ---------------------------------------------------------------------------------------------- one run


def run_config(spec: Spec, settings: Settings):
    from pretrain.config import apply_overrides, preset
    from pretrain.train.data import open_dataset

    vocab = open_dataset(settings.shards).manifest.tokenizer.vocab_size
    run = settings.work / "train" / spec.name
    return apply_overrides(preset("tiny", vocab), [
        *spec.overrides(), f"data.path={settings.shards}", f"train.out={run}", f"train.max_steps={settings.steps}",
        "optim.warmup_steps=20", "train.device=cpu", "train.threads=1", "train.tensorboard=no",
        "train.supervisor=no", "train.preflight_steps=0", f"train.eval_interval={settings.steps}",
        f"train.checkpoint_interval={settings.steps}", "train.keep_last=1", "data.eval_tokens=256"])


def train_one(spec: Spec, settings: Settings) -> RunResult:
    """Train ``spec`` and score the held-out text every ``eval_every`` steps (step 0 included)."""
    import torch

    from fertility.text import TextSource
    from pretrain.eval.text_bits import Scorer, text_bits
    from pretrain.model.gpt import parameter_counts
    from pretrain.train import distributed
    from pretrain.train.data import open_dataset
    from pretrain.train.trainer import Trainer

    cfg = run_config(spec, settings)
    run = Path(cfg.train.out)
    if run.exists():  # an unfinished run of an interrupted benchmark: start it again
        shutil.rmtree(run)
    runtime = distributed.setup("cpu", "fp32")
    dataset = open_dataset(settings.shards)
    trainer = Trainer(cfg, dataset, runtime)
    tok = dataset.manifest.tokenizer
    model = trainer.model
    scorer = Scorer(spec.name, "checkpoint", tok.spec, tok.load().encode_ids, lambda ids: model(ids)[0], tok.bos_id,
                    cfg.model.block_size, runtime.device)
    result = RunResult(spec.name, _spec_dict(spec), parameter_counts(cfg.model).non_embedding, settings.steps)
    step_seconds: list[float] = []

    def evaluate(step: int) -> None:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for lang in LANGS:
                bits = text_bits(scorer, TextSource(lang, str(settings.heldout[lang])),
                                 max_chars=settings.heldout_chars)
                result.bpb.setdefault(lang, []).append(bits.bits_per_byte)
        model.train(was_training)
        result.tokens.append(step * cfg.train.global_batch_tokens)

    def on_step(record: dict[str, Any]) -> None:
        step_seconds.append(cfg.train.global_batch_tokens / record["tokens_per_s"])
        if record["step"] % settings.eval_every == 0 or record["step"] == settings.steps:
            evaluate(record["step"])

    start = time.perf_counter()
    evaluate(0)
    code = trainer.fit(on_step)
    if code:
        raise RuntimeError(f"{spec.name}: the trainer ended with {code}")
    result.ms_per_step = 1000 * statistics.median(step_seconds)
    result.wall_s = time.perf_counter() - start
    shutil.rmtree(run)  # the checkpoint is no result
    return result


def _spec_dict(spec: Spec) -> dict[str, Any]:
    return {**asdict(spec), "size": asdict(spec.size), "extra": list(spec.extra)}


def _run_and_save(spec: Spec, settings: Settings, runs_dir: Path) -> str:
    result = train_one(spec, settings)
    write_json(runs_dir / f"{spec.name}.json", asdict(result))
    return spec.name


def load_results(runs_dir: Path) -> dict[str, RunResult]:
    return {p.stem: RunResult(**read_json(p)) for p in sorted(runs_dir.glob("*.json"))}


def pending(specs: Iterable[Spec], done: Iterable[str]) -> list[Spec]:
    """The specs (each once, in order) whose name is not among the ``done`` runs."""
    done, seen = set(done), {}
    for s in specs:
        if s.name not in done:
            seen.setdefault(s.name, s)
    return list(seen.values())


def run_phase(specs: Iterable[Spec], runs_dir: Path, jobs: int,
              runner: Callable[[Spec, Path], str]) -> list[str]:
    """Run the pending specs, ``jobs`` at a time (in this process with 1); returns the names run."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    todo = pending(specs, load_results(runs_dir))
    if jobs <= 1 or len(todo) <= 1:
        return [runner(s, runs_dir) for s in todo]
    done = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(runner, s, runs_dir): s for s in todo}
        for fut in as_completed(futures):
            done.append(fut.result())
            print(f"  done {done[-1]} ({len(done)}/{len(todo)})", file=sys.stderr, flush=True)
    return done


def step_times(specs: list[Spec], settings: Settings, rounds: int = 6, steps: int = 3) -> dict[str, float]:
    """Median CPU ms per update of each spec's model and optimizer: this process's CPU time (one torch
    thread), in turns (``rounds`` turns of ``steps`` updates on the same batch, after one untimed update).
    CPU time, not wall time: on the shared machine a wall-clock step waits for the other jobs (the runs' own
    medians, taken at different times, differ by up to 8x between runs of the same shape)."""
    import torch

    from pretrain.model.gpt import build_model
    from pretrain.train import distributed
    from pretrain.train.optim import make_optimizer, set_rates, train_step

    torch.set_num_threads(1)
    runtime = distributed.setup("cpu", "fp32")
    setups = []
    for spec in specs:
        cfg = run_config(spec, settings)
        model = build_model(cfg.model, spec.seed)
        optimizer = make_optimizer(model, cfg.optim, runtime.device)
        set_rates(optimizer, 0, cfg.optim, cfg.train.max_steps)
        batch = torch.randint(0, cfg.model.real_vocab_size, (cfg.train.global_batch_tokens // cfg.seq_len,
                                                             cfg.seq_len + 1), generator=torch.Generator().manual_seed(0))
        micro = list(batch.split(cfg.data.micro_batch))
        train_step(model, optimizer, micro, runtime, cfg.optim.grad_clip)
        setups.append((spec.name, model, optimizer, micro, cfg.optim.grad_clip))
    times: dict[str, list[float]] = {name: [] for name, *_ in setups}
    for _ in range(rounds):
        for name, model, optimizer, micro, clip in setups:
            for _ in range(steps):
                start = time.process_time()
                train_step(model, optimizer, micro, runtime, clip)
                times[name].append(time.process_time() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


# ------------------------------------------------------------------------------------------------ figures


def tokens_to_reach(tokens: list[int], bpb: list[float], target: float) -> float | None:
    """The first tokens at which the curve reaches ``target``, linearly interpolated between evaluations;
    None if it never does."""
    for i, (t, b) in enumerate(zip(tokens, bpb, strict=True)):
        if b <= target:
            if i == 0:
                return float(t)
            t0, b0 = tokens[i - 1], bpb[i - 1]
            return t0 + (t - t0) * (b0 - target) / (b0 - b)
    return None


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def curve(runs: list[RunResult], lang: str) -> tuple[list[int], list[float], list[float]]:
    """Tokens, seed mean and seed std of the bits per byte of ``runs`` (same evaluations each)."""
    tokens = runs[0].tokens
    if any(r.tokens != tokens for r in runs):
        raise ValueError(f"runs {[r.name for r in runs]} were evaluated at different tokens")
    stats = [mean_std([r.bpb[lang][i] for r in runs]) for i in range(len(tokens))]
    return tokens, [m for m, _ in stats], [s for _, s in stats]


def final_mean(runs: list[RunResult]) -> float:
    return statistics.fmean(r.final(lang) for r in runs for lang in LANGS)


def compare(recipe: list[RunResult], baseline: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Per language: the token ratio to reach the baseline's final (None: never), the paired final gap
    (recipe - baseline, by seed) mean and std, and both sides' finals."""
    base = {r.spec["seed"]: r for r in baseline}
    out = {}
    for lang in LANGS:
        tokens, mean, _ = curve(recipe, lang)
        target = statistics.fmean(r.final(lang) for r in baseline)
        reach = tokens_to_reach(tokens, mean, target)
        gaps = [r.final(lang) - base[r.spec["seed"]].final(lang) for r in recipe if r.spec["seed"] in base]
        gap, gap_std = mean_std(gaps)
        out[lang] = {"token_ratio": None if reach is None else reach / baseline[0].tokens[-1],
                     "gap": gap, "gap_std": gap_std, "beyond_spread": abs(gap) > gap_std and gap < 0,
                     "final": mean_std([r.final(lang) for r in recipe]),
                     "baseline_final": mean_std([r.final(lang) for r in baseline]), "seeds": len(gaps)}
    return out


def best_rate(runs: list[RunResult], key: str) -> float:
    """The rate ``key`` ("lr" or "muon_lr") whose run has the lowest final bits per byte (languages' mean)."""
    return min(runs, key=lambda r: final_mean([r])).spec[key]


def transfer_check(sweeps: dict[str, list[RunResult]], key: str, grid: tuple[float, ...], small: Size, large: Size,
                   exponent: float) -> dict[str, Any]:
    """The rule ``rate ∝ width ** exponent`` from the small size's optimum to the large size: the predicted
    rate, the large size's optimum, and whether the prediction is within one step of the sweep's grid of it."""
    best_small, best_large = best_rate(sweeps[small.name], key), best_rate(sweeps[large.name], key)
    predicted = best_small * (large.n_embd / small.n_embd) ** exponent
    step = math.log(grid[1] / grid[0])  # the grid is geometric
    steps_off = abs(math.log(predicted / best_large)) / step
    return {"rate": key, "small_optimum": best_small, "large_optimum": best_large, "predicted": predicted,
            "grid_steps_off": steps_off, "holds": steps_off <= 1.0 + 1e-9}


# ------------------------------------------------------------------------------------------------ phases


def _of(results: dict[str, RunResult], specs: Iterable[Spec]) -> list[RunResult]:
    return [results[s.name] for s in specs]


def plan(results: dict[str, RunResult], sizes: tuple[Size, ...], seeds: tuple[int, ...], adamw_lrs, muon_lrs,
         candidates: dict[str, tuple[str, ...]]) -> tuple[int, list[Spec]]:
    """The next phase's specs given the results so far: (phase number, specs); phase 5 = nothing left.
    ``muon_lrs`` is the pair of Muon grids, the small size's and the large size's."""
    adamw_sweep = {z.name: [Spec(z, "adamw", lr, seeds[0]) for lr in adamw_lrs] for z in sizes}
    if pending([s for v in adamw_sweep.values() for s in v], results):
        return 1, [s for v in adamw_sweep.values() for s in v]
    adamw_lr = {z: best_rate(_of(results, adamw_sweep[z]), "lr") for z in adamw_sweep}
    grids = {sizes[0].name: muon_lrs[0], sizes[1].name: muon_lrs[1]}
    muon_sweep = {z.name: [Spec(z, "muon", adamw_lr[z.name], seeds[0], m) for m in grids[z.name]] for z in sizes}
    adamw_seeds = [Spec(z, "adamw", adamw_lr[z.name], s) for z in sizes for s in seeds]
    phase2 = [s for v in muon_sweep.values() for s in v] + adamw_seeds
    if pending(phase2, results):
        return 2, phase2
    muon_lr = {z: best_rate(_of(results, muon_sweep[z]), "muon_lr") for z in muon_sweep}

    def muon(z: Size, s: int, names: tuple[str, ...] = ()) -> Spec:
        extra = tuple(o for n in names for o in candidates[n])
        return Spec(z, "muon", adamw_lr[z.name], s, muon_lr[z.name], extra, "+".join(names))

    small, pair = sizes[0], seeds[:CANDIDATE_SEEDS]
    phase3 = [muon(z, s) for z in sizes for s in seeds] + [muon(small, s, (c,)) for c in candidates for s in pair]
    if pending(phase3, results):
        return 3, phase3
    winners = candidate_verdicts(_of(results, [muon(small, s) for s in pair]),
                                 {c: _of(results, [muon(small, s, (c,)) for s in pair]) for c in candidates})
    recipe = tuple(c for c, v in winners.items() if v["wins"])
    phase4 = [muon(z, s, recipe) for z in sizes for s in seeds]
    if pending(phase4, results):
        return 4, phase4
    return 5, []


def candidate_verdicts(baseline: list[RunResult], candidates: dict[str, list[RunResult]]
                       ) -> dict[str, dict[str, Any]]:
    """Per candidate: its comparison with Muon (paired by seed) and whether it wins in every language."""
    out = {}
    for name, runs in candidates.items():
        c = compare(runs, baseline)
        out[name] = {"wins": all(c[lang]["beyond_spread"] for lang in LANGS), "by_language": c}
    return out


# ------------------------------------------------------------------------------------------------ report


def summarise(results: dict[str, RunResult], sizes: tuple[Size, ...], seeds: tuple[int, ...], adamw_lrs, muon_lrs,
              candidates: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The figures of a finished benchmark: the sweeps, the chosen rates, the candidates' verdicts, and per size
    Muon and the recipe against AdamW; the transfer rule's check."""
    runs = list(results.values())

    def pick(size: Size, optimizer: str, **match) -> list[RunResult]:
        out = [r for r in runs if r.spec["size"]["name"] == size.name and r.spec["optimizer"] == optimizer
               and all(r.spec[k] == v for k, v in match.items())]
        return sorted(out, key=lambda r: r.spec["seed"])

    sweeps = {"adamw": {z.name: pick(z, "adamw", seed=seeds[0]) for z in sizes}}
    adamw_lr = {z.name: best_rate(sweeps["adamw"][z.name], "lr") for z in sizes}
    sweeps["muon"] = {z.name: pick(z, "muon", seed=seeds[0], label="", lr=adamw_lr[z.name]) for z in sizes}
    muon_lr = {z.name: best_rate(sweeps["muon"][z.name], "muon_lr") for z in sizes}
    small = sizes[0]

    def muon(z: Size, label: str) -> list[RunResult]:
        return pick(z, "muon", lr=adamw_lr[z.name], muon_lr=muon_lr[z.name], label=label)

    pair = seeds[:CANDIDATE_SEEDS]
    verdicts = candidate_verdicts([r for r in muon(small, "") if r.spec["seed"] in pair],
                                  {c: muon(small, c) for c in candidates})
    recipe = "+".join(c for c in candidates if verdicts[c]["wins"])
    sizes_out = {}
    for z in sizes:
        adamw = pick(z, "adamw", lr=adamw_lr[z.name])
        arms = {k: v for k, v in (("muon", muon(z, "")), ("recipe", muon(z, recipe))) if v}  # recipe: by phase 4
        sizes_out[z.name] = {
            "non_embedding": adamw[0].non_embedding, "adamw_lr": adamw_lr[z.name], "muon_lr": muon_lr[z.name],
            "ms_per_step": {"adamw": mean_std([r.ms_per_step for r in adamw]),
                            **{k: mean_std([r.ms_per_step for r in v]) for k, v in arms.items()}},
            **{f"{k}_vs_adamw": compare(v, adamw) for k, v in arms.items()}}
    return {
        "sizes": sizes_out,
        "parameter_ratio": sizes_out[sizes[1].name]["non_embedding"] / sizes_out[small.name]["non_embedding"],
        "sweeps": {o: {z: {str(r.spec["muon_lr" if o == "muon" else "lr"]): {lang: r.final(lang) for lang in LANGS}
                           for r in rs} for z, rs in per.items()} for o, per in sweeps.items()},
        "candidates": verdicts, "recipe": ["muon", *filter(None, recipe.split("+"))],
        "transfer": {"adamw": transfer_check(sweeps["adamw"], "lr", adamw_lrs, small, sizes[1], -1.0),
                     "muon": transfer_check(sweeps["muon"], "muon_lr", muon_lrs[1], small, sizes[1], 0.0)},
        "curves": {z.name: {arm: {lang: dict(zip(("tokens", "mean", "std"), curve(rs, lang), strict=True))
                                  for lang in LANGS}
                            for arm, rs in (("adamw", pick(z, "adamw", lr=adamw_lr[z.name])),
                                            ("muon", muon(z, "")), ("recipe", muon(z, recipe))) if rs}
                   for z in sizes},
    }


def _pm(pair, digits: int = 4) -> str:
    return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def _ratio(x: float | None) -> str:
    return "not reached" if x is None else f"{x:.2f}x"


def table(summary: dict[str, Any], settings: dict[str, Any]) -> str:
    lines = [f"Held-out bits per byte after {settings['steps']} steps of 1,024 tokens (mean ± std over seeds "
             f"{settings['seeds']}); recipe: {' + '.join(summary['recipe'])}. Non-embedding parameters: "
             + ", ".join(f"{z} {v['non_embedding']:,}" for z, v in summary["sizes"].items())
             + f" (ratio {summary['parameter_ratio']:.2f}).", "",
             "| size | arm | rates | lang | final bpb | AdamW final bpb | tokens to AdamW's final | gap at equal "
             "tokens (paired) | beyond spread | ms/step (runs' median) |", "|---|---|---|---|---:|---:|---:|---:|---|---:|"]
    for z, v in summary["sizes"].items():
        for arm in (a for a in ("muon", "recipe") if f"{a}_vs_adamw" in v):
            rates = f"muon_lr {v['muon_lr']:g}, lr {v['adamw_lr']:g}"
            for lang, c in v[f"{arm}_vs_adamw"].items():
                lines.append(f"| {z} | {arm} ({c['seeds']} seeds) | {rates} | {lang} | {_pm(c['final'])} | {_pm(c['baseline_final'])} | "
                             f"{_ratio(c['token_ratio'])} | {_pm((c['gap'], c['gap_std']))} | "
                             f"{'yes' if c['beyond_spread'] else 'no'} | {_pm(v['ms_per_step'][arm], 1)} |")
        lines.append(f"| {z} | adamw | lr {v['adamw_lr']:g} | | | | | | | {_pm(v['ms_per_step']['adamw'], 1)} |")
    timed = summary.get("step_ms_interleaved") or {}
    if timed:
        lines += ["", "CPU ms per update (median), measured in turns in one process on one torch thread (the "
                  "same batch, after one untimed update):", "",
                  "| size | AdamW | Muon | recipe | Muon / AdamW |", "|---|---:|---:|---:|---:|"]
        for z, t in timed.items():
            lines.append(f"| {z} | {t['adamw']:.1f} | {t['muon']:.1f} | {t['recipe']:.1f} | "
                         f"{t['muon'] / t['adamw']:.2f}x |")
    lines += ["", "Sweeps (seed 0, final bits per byte bn / en; Muon's with the size's best AdamW lr for the rest):",
              "", "| optimizer | size | rate | bn | en |", "|---|---|---:|---:|---:|"]
    for o, per in summary["sweeps"].items():
        for z, rates in per.items():
            for rate, f in sorted(rates.items(), key=lambda kv: float(kv[0])):
                lines.append(f"| {o} | {z} | {rate} | {f['bn']:.4f} | {f['en']:.4f} |")
    lines += ["", "Candidates on Muon at the small size (candidate - Muon, paired by seed; wins if lower beyond "
              "the spread in every language):", "", "| candidate | lang | candidate bpb | Muon bpb | gap | verdict |",
              "|---|---|---:|---:|---:|---|"]
    for c, v in summary["candidates"].items():
        for lang, x in v["by_language"].items():
            lines.append(f"| {c} | {lang} | {_pm(x['final'])} | {_pm(x['baseline_final'])} | "
                         f"{_pm((x['gap'], x['gap_std']))} | {'wins' if v['wins'] else 'loses'} |")
    lines += ["", "Transfer rule (AdamW lr ∝ 1/width; Muon's lr width-independent):", "",
              "| rate | small optimum | predicted for the large size | large optimum | grid steps off | holds |",
              "|---|---:|---:|---:|---:|---|"]
    for t in summary["transfer"].values():
        lines.append(f"| {t['rate']} | {t['small_optimum']:g} | {t['predicted']:g} | {t['large_optimum']:g} | "
                     f"{t['grid_steps_off']:.2f} | {'yes' if t['holds'] else 'no'} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(summary["curves"])
    fig, axes = plt.subplots(len(sizes), len(LANGS), figsize=(5 * len(LANGS), 3.6 * len(sizes)), squeeze=False)
    for row, z in zip(axes, sizes, strict=True):
        for ax, lang in zip(row, LANGS, strict=True):
            for arm, per in summary["curves"][z].items():
                c = per[lang]
                ax.plot(c["tokens"], c["mean"], label=arm)
                ax.fill_between(c["tokens"], [m - s for m, s in zip(c["mean"], c["std"], strict=True)],
                                [m + s for m, s in zip(c["mean"], c["std"], strict=True)], alpha=0.25)
            final = summary["sizes"][z]["muon_vs_adamw"][lang]["baseline_final"][0]
            ax.axhline(final, color="grey", linewidth=0.8, linestyle="--", label="AdamW's final")
            # From the first evaluation after the start down: the untrained model's point would flatten the rest.
            curves = summary["curves"][z].values()
            top = max(c[lang]["mean"][1] + c[lang]["std"][1] for c in curves)
            bottom = min(m - s for c in curves for m, s in zip(c[lang]["mean"], c[lang]["std"], strict=True))
            ax.set_ylim(bottom - 0.05 * (top - bottom), top)
            ax.set_title(f"{z}, {lang}")
            ax.set_xlabel("tokens seen")
            ax.set_ylabel("held-out bits per byte")
            ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ command


def prepare(data: Path, work: Path, vocab_size: int, max_chars: int, heldout_chars: int, tokens: int
            ) -> tuple[Path, dict[str, Path]]:
    """The tokenizer (``tokenizers-train``'s defaults), the shards and the held-out text; kept for a rerun."""
    tok = work / "tok" / "tokenizer.json"
    if not tok.is_file():
        texts = [a for f in bench_model.BN for a in ("--text", f"bn={data / f}")] + \
                [a for f in bench_model.EN for a in ("--text", f"en={data / f}")]
        bench_model.sh("tokenizers_train", *texts, "--vocab-size", str(vocab_size), "--max-chars-per-source",
                       str(max_chars), "--no-progress", "--out", str(work / "tok"))
    heldout = bench_model.write_heldout(data, work, max_chars, heldout_chars)
    bench_model.build_corpus(data, tok, work / "shards", tokens, max_chars)
    return work / "shards", {lang: heldout[lang] for lang in LANGS}


def main() -> None:
    p = cli.parser("bench_recipe", __doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="the shared data folder (bn/ and en/)")
    p.add_argument("--out", type=Path, required=True, help="results folder; rerun the same command to resume")
    p.add_argument("--jobs", type=cli.positive_int, default=1, help="runs at a time, one torch thread each")
    p.add_argument("--vocab-size", type=cli.positive_int, default=8192)
    p.add_argument("--max-chars", type=cli.positive_int, default=1_500_000, help="characters read from each file")
    p.add_argument("--heldout-chars", type=cli.positive_int, default=30_000,
                   help="held-out characters scored per language")
    p.add_argument("--steps", type=cli.at_least(2, int), default=200, help="updates of 1,024 tokens per run")
    p.add_argument("--eval-every", type=cli.positive_int, default=25)
    p.add_argument("--quick", action="store_true", help="the pipeline at 12 steps, 2 rates, 2 seeds, 1 candidate")
    p.add_argument("--report-only", action="store_true",
                   help="write the report from the runs done so far (phases 1-3 at least), run nothing")
    args = p.parse_args()
    if not (args.data / bench_model.BN[0]).is_file():
        p.error(f"--data {args.data}: expected the shared data folder with {bench_model.BN[0]}")
    seeds, adamw_lrs, muon_lrs, candidates = SEEDS, ADAMW_LRS, (MUON_LRS, LARGE_MUON_LRS), CANDIDATES
    if args.quick:
        args.steps, args.eval_every, args.heldout_chars = 12, 6, 4000
        seeds, adamw_lrs, muon_lrs = SEEDS[:2], ADAMW_LRS[1:3], (MUON_LRS[1:3], MUON_LRS[1:3])
        candidates = {"wsd": CANDIDATES["wsd"]}
    work = args.out / "runs"
    args.out.mkdir(parents=True, exist_ok=True)
    shards, heldout = prepare(args.data, work, args.vocab_size, args.max_chars, args.heldout_chars,
                              max(400_000, 2 * args.steps * 1024))
    settings = Settings(shards, heldout, work, args.steps, args.eval_every, args.heldout_chars)
    runs_dir = work / "done"
    from pretrain.config import apply_overrides, preset

    counts = {}
    for z in SIZES:
        from pretrain.model.gpt import parameter_counts

        cfg = apply_overrides(preset("tiny", args.vocab_size), list(z.overrides()))
        counts[z.name] = parameter_counts(cfg.model).non_embedding
    print("non-embedding parameters: " + ", ".join(f"{k} {v:,}" for k, v in counts.items())
          + f"; ratio {counts[SIZES[1].name] / counts[SIZES[0].name]:.2f}", file=sys.stderr, flush=True)
    started = time.time()
    while not args.report_only:
        phase, specs = plan(load_results(runs_dir), SIZES, seeds, adamw_lrs, muon_lrs, candidates)
        if not specs:
            break
        todo = pending(specs, load_results(runs_dir))
        print(f"phase {phase}: {len(todo)} of {len(specs)} runs to do", file=sys.stderr, flush=True)
        run_phase(todo, runs_dir, args.jobs, _Runner(settings))
    summary = summarise(load_results(runs_dir), SIZES, seeds, adamw_lrs, muon_lrs, candidates)
    arms = {}
    recipe = tuple(summary["recipe"][1:])
    for z in SIZES:
        v = summary["sizes"][z.name]
        arms[z.name] = {"adamw": Spec(z, "adamw", v["adamw_lr"], seeds[0]),
                        "muon": Spec(z, "muon", v["adamw_lr"], seeds[0], v["muon_lr"]),
                        "recipe": Spec(z, "muon", v["adamw_lr"], seeds[0], v["muon_lr"],
                                       tuple(o for c in recipe for o in candidates[c]), "+".join(recipe))}
    timed = work / "step_times.json"  # kept: a --report-only rerun does not measure again
    names = sorted(s.name for a in arms.values() for s in a.values())
    known = read_json(timed) if timed.is_file() else {}
    if sorted(known) != names:
        known = step_times([s for a in arms.values() for s in a.values()], settings)
        write_json(timed, known)
    summary["step_ms_interleaved"] = {z: {arm: known[s.name] for arm, s in a.items()} for z, a in arms.items()}
    used = {"steps": args.steps, "seeds": list(seeds), "vocab_size": args.vocab_size, "max_chars": args.max_chars,
            "heldout_chars": args.heldout_chars, "eval_every": args.eval_every, "jobs": args.jobs,
            "bn": bench_model.BN, "en": bench_model.EN, "quick": args.quick,
            "load_average_end": os.getloadavg()[0], "seconds_this_command": round(time.time() - started)}
    md = table(summary, used)
    atomic_write_text(args.out / "results.md", md)
    write_json(args.out / "results.json", {"settings": used, "summary": summary,
                                           "runs": {k: asdict(v) for k, v in load_results(runs_dir).items()}})
    plot(summary, args.out / "recipe.png")
    print(md)


@dataclass(frozen=True)
class _Runner:
    """``run_phase``'s runner for real training (a picklable callable for the worker processes)."""

    settings: Settings

    def __call__(self, spec: Spec, runs_dir: Path) -> str:
        return _run_and_save(spec, self.settings, runs_dir)


if __name__ == "__main__":
    main()
