"""Per-language evaluation: validation loss, bits per token, per character and per byte, for the trained
model and for its random-init twin, plus a few sampled continuations. ``pretrain eval --run RUN``.

Bits per character and per byte do not depend on the tokenizer, so runs with different tokenizers can be
compared. Each validation document is scored after its BOS, BOS never a target (`pretrain.train.validation`);
with every token scored (``--max-tokens 0``) bits per byte is the total NLL in bits over the text's bytes
(the manifest counts the bytes and characters of the cleaned text), the figure ``--text`` gives on the same
documents; with a budget it is the scored tokens' bits per token x the language's text tokens per byte.

The random-init twin is the model the run started from: the same config built after the same seed, never
trained. Its loss is about ln(vocab); the ratio trained / twin says how much the run learned.

``RUN/eval.json`` (schema_version 1) accumulates (`pretrain.eval.report`): the sections of an earlier
``pretrain eval`` of the same checkpoint (``text``, ``tasks``) are kept; another checkpoint starts anew::

    {"schema_version": 1, "run", "checkpoint", "checkpoint_sha256", "step", "tokens_seen", "max_tokens_per_language",
     "tokenizer": {"spec", "sha256", "vocab_size"}, "model": {"preset", "parameters", "config"},
     "sampling": {"temperature", "top_k", "seed", "banned"},
     "languages": {LANG: {"model": METRICS, "random_init": METRICS, "loss_ratio", "samples": [SAMPLE]}},
     "mean": {"model_loss", "random_init_loss", "loss_ratio"}}
    METRICS = {"loss", "bits_per_token", "bits_per_char", "bits_per_byte", "targets"}
    SAMPLE = {"prompt_ids", "completion_ids", "prompt", "completion"}   (texts null without the tokenizer)
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from common.errors import InputError
from common.fileio import write_json
from common.paths import stamped
from pretrain.eval.report import checkpoint_sha256, earlier_report
from pretrain.train import rundir
from pretrain.train.data import Dataset, open_dataset
from pretrain.train.distributed import Runtime
from pretrain.train.validation import language_metrics

SCHEMA_VERSION = 1


def _tokenizer(dataset: Dataset):
    """The manifest's tokenizer for decoding samples, or None if it cannot be loaded or is not the same."""
    try:
        return dataset.manifest.tokenizer.load()
    except Exception:  # a missing, unloadable or replaced tokenizer only costs the sample texts
        return None


# Samples are drawn, not greedy: a small model's greedy continuation collapses onto its most frequent token
# (a run of commas) long before its loss stops falling, which says little about what it learned.
SAMPLING = {"temperature": 0.8, "top_k": 40, "seed": 0, "banned": "BOS"}


def sample_continuations(model: torch.nn.Module, dataset: Dataset, lang: str, n: int, prompt_tokens: int,
                         new_tokens: int, runtime: Runtime, tokenizer=None) -> list[dict[str, Any]]:
    """Sampled continuations (:data:`SAMPLING`, reproducible) of the first ``n`` documents of a language's
    validation text; BOS is never sampled, so each continues the same document."""
    bos = dataset.manifest.tokenizer.bos_id
    stream = dataset.val[lang]
    head = stream.window(0, min(len(stream), 200_000))
    starts = np.flatnonzero(head == bos) + 1
    generator = torch.Generator().manual_seed(SAMPLING["seed"])
    samples = []
    for start in starts[:n]:
        prompt = head[start:start + prompt_tokens]
        if len(prompt) < prompt_tokens or (prompt == bos).any():
            continue
        was_training = model.training
        model.eval()
        ids = torch.from_numpy(np.concatenate([[bos], prompt])).unsqueeze(0).to(runtime.device)
        with runtime.autocast():
            out = model.generate(ids, new_tokens, temperature=SAMPLING["temperature"], top_k=SAMPLING["top_k"],
                                 generator=generator, banned=(bos,))[0, 1:].tolist()
        model.train(was_training)
        prompt_ids, completion_ids = out[:prompt_tokens], out[prompt_tokens:]
        samples.append({"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                        "prompt": tokenizer.decode(prompt_ids) if tokenizer else None,
                        "completion": tokenizer.decode(completion_ids) if tokenizer else None})
    return samples


def evaluate_run(run_dir: str | Path, *, checkpoint: str | Path | None = None, data: str | None = None,
                 max_tokens: int = 0, samples: int = 3, prompt_tokens: int = 16, new_tokens: int = 32,
                 device: str = "auto", micro_batch: int = 0, plot: bool = True,
                 out: str | Path | None = None) -> dict[str, Any]:
    """Evaluate a run's checkpoint (default: the latest) and its random-init twin; write RUN/eval.json (its
    other sections for the same checkpoint kept) and (``plot``) RUN/eval.png, or with ``out`` that file only
    (the run is left as it is).

    The data is ``data``, else the shards the run trained on (`pretrain.train.rundir.resolve_path`: from any
    folder)."""
    from pretrain.config import RunConfig
    from pretrain.model.gpt import build_model
    from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint
    from pretrain.train.distributed import setup

    run_dir = Path(run_dir)
    path = Path(checkpoint) if checkpoint else latest_checkpoint(run_dir)
    if path is None:
        raise InputError(f"{run_dir}: no checkpoint to evaluate (train first, or pass --checkpoint)")
    state = load_checkpoint(path)
    cfg = RunConfig.from_dict(state["config"], f"checkpoint {path}")
    dataset = open_dataset(data or rundir.resolve_path(run_dir, cfg.data.path, cfg.train.out))
    if dataset.manifest.tokenizer.sha256 != state["tokenizer"]["sha256"]:
        raise InputError(f"{dataset.path}: shards use tokenizer sha256 {dataset.manifest.tokenizer.sha256}, "
                         f"the checkpoint {path} was trained on {state['tokenizer']['sha256']}")
    runtime = setup(device, cfg.train.dtype)
    micro = micro_batch or cfg.data.micro_batch
    twin = build_model(cfg.model, cfg.train.seed).to(runtime.device)
    model = build_model(cfg.model, cfg.train.seed)
    model.load_state_dict(state["model"])
    model.to(runtime.device)
    tokenizer = _tokenizer(dataset) if samples else None
    trained = language_metrics(model, dataset, cfg.seq_len, max_tokens, micro, runtime)
    untrained = language_metrics(twin, dataset, cfg.seq_len, max_tokens, micro, runtime)
    info = dataset.manifest.tokenizer
    sha256 = checkpoint_sha256(path)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run": str(run_dir), "checkpoint": str(path),
        "checkpoint_sha256": sha256, "step": state["step"],
        "tokens_seen": state["tokens_seen"], "max_tokens_per_language": max_tokens,
        "tokenizer": {"spec": info.spec, "sha256": info.sha256, "vocab_size": info.vocab_size},
        "model": {"preset": cfg.model_preset, "parameters": model.num_params(), "config": asdict(cfg.model)},
        "sampling": SAMPLING, "languages": {},
    }
    for lang in trained:
        report["languages"][lang] = {
            "model": asdict(trained[lang]), "random_init": asdict(untrained[lang]),
            "loss_ratio": trained[lang].loss / untrained[lang].loss,
            "samples": sample_continuations(model, dataset, lang, samples, prompt_tokens, new_tokens, runtime,
                                            tokenizer),
        }
    m = statistics.fmean(v.loss for v in trained.values())
    r = statistics.fmean(v.loss for v in untrained.values())
    report["mean"] = {"model_loss": m, "random_init_loss": r, "loss_ratio": m / r}
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_json(out, stamped(report))
        return report
    report = {**earlier_report(run_dir / "eval.json", sha256, str(path)), **report}
    write_json(run_dir / "eval.json", stamped(report))
    if plot:
        from pretrain.eval.plots import plot_eval

        plot_eval(report, run_dir, run_dir / "eval.png")
    return report


def final_eval(run_dir: Path, device: str, max_tokens: int) -> None:
    """The evaluation ``pretrain launch`` runs once a run has trained (unless ``--no-eval``), printed to stderr."""
    print(format_eval(evaluate_run(run_dir, device=device, max_tokens=max_tokens)), file=sys.stderr)


def format_eval(report: dict[str, Any]) -> str:
    """A terminal table of eval.json."""
    def fmt(x):
        return "-" if x is None else f"{x:.3f}"

    lines = [f"checkpoint {report['checkpoint']} (step {report['step']}, {report['tokens_seen']:,} tokens)",
             f"{'lang':<6}{'loss':>8}{'twin':>8}{'ratio':>7}{'bits/char':>11}{'twin':>8}{'bits/byte':>11}{'twin':>8}"]
    for lang, r in report["languages"].items():
        m, t = r["model"], r["random_init"]
        lines.append(f"{lang:<6}{fmt(m['loss']):>8}{fmt(t['loss']):>8}{fmt(r['loss_ratio']):>7}"
                     f"{fmt(m['bits_per_char']):>11}{fmt(t['bits_per_char']):>8}"
                     f"{fmt(m['bits_per_byte']):>11}{fmt(t['bits_per_byte']):>8}")
    mean = report["mean"]
    lines.append(f"mean loss {mean['model_loss']:.3f} vs random-init {mean['random_init_loss']:.3f} "
                 f"(ratio {mean['loss_ratio']:.3f})")
    for lang, r in report["languages"].items():
        for s in r["samples"][:2]:
            if s["prompt"] is not None:
                lines.append(f"[{lang}] {s['prompt']!r} -> {s['completion']!r}")
    return "\n".join(lines)
