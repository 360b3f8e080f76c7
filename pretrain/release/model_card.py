"""The model card (``README.md``, in the Hugging Face hub's format) that ``pretrain export`` writes.

Every number comes from the run itself: the architecture and parameter count from the checkpoint's config,
the tokenizer's characters per token per language from ``fertility`` (on the texts ``pretrain eval --text``
scored, else from the validation shards' counts in the manifest), the corpus mixture in tokens from the
shard manifest, the training tokens and schedule from the checkpoint, and the evaluation tables from the
run's ``eval.json`` when it evaluates this very checkpoint (same step, same checkpoint sha256). What is not
available is said in words, with the command that produces it; the card never shows a placeholder.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import InputError
from common.fileio import read_json
from corpus.shards.format import Manifest, ShardError
from pretrain.config import OPTIMIZERS, SCHEDULES, RunConfig, effective_warmup
from pretrain.model.gpt import parameter_counts
from pretrain.release.tokenizer import TokenRoles


@dataclass
class CardInputs:
    """What the card is rendered from; ``notes`` say why a section has no numbers."""

    name: str
    config: RunConfig
    step: int
    tokens_seen: int
    checkpoint_sha256: str
    tokenizer: dict[str, Any]  # the checkpoint's record: spec, sha256, vocab_size, bos_id, eos_id
    dtype: str
    roles: TokenRoles | None = None  # the export's special tokens; a card rendered without them leaves them out
    manifest: Manifest | None = None
    fertility: dict[str, dict[str, Any]] = field(default_factory=dict)  # LANG -> chars/bytes per token, source
    fertility_source: str = ""
    evaluation: dict[str, Any] = field(default_factory=dict)  # the sections of eval.json for this checkpoint
    notes: dict[str, str] = field(default_factory=dict)


def default_eval_path(checkpoint: Path) -> Path | None:
    """RUN/eval.json for a checkpoint in RUN/checkpoints/."""
    return checkpoint.parent.parent / "eval.json" if checkpoint.parent.name == "checkpoints" else None


EVAL_SECTIONS = ("languages", "text", "tasks")  # what `pretrain eval` writes; a report holds at least one


def read_eval_report(path: Path, what: str = "--eval") -> dict[str, Any]:
    """The eval.json of ``pretrain eval`` at ``path``, else an :class:`InputError` naming ``what`` and the file."""
    try:
        report = read_json(path)
    except IsADirectoryError:
        raise InputError(f"{what} {path}: is a folder; expected the eval.json of `pretrain eval`") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{what} {path}: not JSON ({e}); expected the eval.json of `pretrain eval`") from None
    if not isinstance(report, dict) or "schema_version" not in report or not any(k in report for k in EVAL_SECTIONS):
        raise InputError(f"{what} {path}: not an eval report (expected a JSON object with schema_version and "
                         f"one of {', '.join(EVAL_SECTIONS)}, as `pretrain eval` writes)")
    return report


def matching_evaluation(report: dict[str, Any], step: int, sha256: str) -> dict[str, Any]:
    """The sections of an eval.json that evaluate the checkpoint of ``step`` / ``sha256`` (the validation
    split by its checkpoint_sha256 where it names one, else by step)."""
    out = {}
    if report.get("step") == step and "languages" in report and report.get("checkpoint_sha256", sha256) == sha256:
        out["validation"] = report
    for key in ("text", "tasks"):
        section = report.get(key)
        if section and (section.get("checkpoint_sha256") == sha256
                        or ("checkpoint_sha256" not in section and report.get("step") == step)):
            out[key] = section
    return out


def check_card_inputs(eval_json: Path | None, data: str | None) -> None:
    """An ``--eval`` or ``--data`` the user named must be what the card reads (an eval report, a shard folder
    with a manifest), checked before any export work; only the run's own defaults may be absent."""
    if eval_json is not None:
        if not eval_json.exists():
            raise InputError(f"--eval {eval_json}: no such file (expected the eval.json of `pretrain eval`)")
        read_eval_report(eval_json)
    if data is not None:
        try:
            Manifest.load(data)
        except ShardError as e:
            raise InputError(f"--data {data}: {e}") from None


def gather(state: dict[str, Any], *, name: str, checkpoint: Path, checkpoint_sha256: str, tokenizer_spec: str,
           dtype: str, tokenizer_name: str = "", roles: TokenRoles | None = None, eval_json: Path | None = None,
           data: str | None = None) -> CardInputs:
    """Collect the card's numbers for a loaded checkpoint ``state``. ``eval_json`` and ``data``, when given, were
    checked by ``pretrain export`` (`check_card_inputs`); the run's own, when absent or unreadable, are said
    to be missing in the card."""
    cfg = RunConfig.from_dict(state["config"])
    inputs = CardInputs(name=name, config=cfg, step=state["step"], tokens_seen=state["tokens_seen"],
                        checkpoint_sha256=checkpoint_sha256,
                        tokenizer={**(state.get("tokenizer") or {}), "spec": tokenizer_spec,
                                   "name": tokenizer_name or tokenizer_spec}, dtype=dtype,
                        roles=roles)
    shards = data or cfg.data.path
    try:
        inputs.manifest = Manifest.load(shards)
    except ShardError:
        inputs.notes["data"] = (f"The shard manifest ({Path(shards).name}/manifest.json) was not found at export; "
                                "`pretrain export --data SHARDS` adds the corpus mixture.")
    path = eval_json or default_eval_path(checkpoint)
    if path is not None and path.is_file():
        # The run's own eval.json, if unreadable, is no evaluation: the card says none was found.
        with contextlib.suppress(InputError):
            inputs.evaluation = matching_evaluation(read_eval_report(path), inputs.step, checkpoint_sha256)
    if not inputs.evaluation:
        inputs.notes["eval"] = ("No evaluation of this checkpoint was found (eval.json of the same step and "
                                "checkpoint); `pretrain eval --run RUN --checkpoint CKPT [--text ...] [--tasks ...]` "
                                "before exporting adds it.")
    _measure_tokenizer(inputs)
    return inputs


def _measure_tokenizer(inputs: CardInputs) -> None:
    """Characters and bytes per token per language: fertility on the evaluated texts, else the manifest."""
    from fertility.analysis import analyze
    from fertility.text import source_from_spec
    from fertility.tokenizers import load_tokenizer

    text = inputs.evaluation.get("text")
    if text:
        sources = [source_from_spec(r["source"], lang) for lang, r in text["languages"].items()]
        report = analyze([load_tokenizer(inputs.tokenizer["spec"])], sources, max_chars=text.get("max_chars"),
                         progress=False)
        for lang, m in report.tokenizers[0].languages.items():
            inputs.fertility[lang] = {"chars_per_token": m.chars_per_token, "bytes_per_token": m.bytes_per_token,
                                      "chars": m.chars}
        inputs.fertility_source = "`fertility` on the texts of the evaluation below"
    elif inputs.manifest is not None:
        for lang in inputs.manifest.languages():
            val = inputs.manifest.split("val", language=lang)
            tokens, chars, nbytes = (sum(s.tokens for s in val), sum(s.chars for s in val), sum(s.bytes for s in val))
            if tokens and chars:
                inputs.fertility[lang] = {"chars_per_token": chars / tokens, "bytes_per_token": nbytes / tokens,
                                          "chars": chars}
        inputs.fertility_source = "the validation shards' counts in the manifest (tokens include one BOS per document)"
    else:
        inputs.notes["tokenizer"] = "Neither evaluated texts nor the shard manifest were available to measure it on."


def _num(x: float, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _tokens(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def _languages(inputs: CardInputs) -> list[str]:
    langs = set(inputs.manifest.languages()) if inputs.manifest else set()
    langs |= set(inputs.evaluation.get("text", {}).get("languages", {}))
    return sorted(langs)


def _header(inputs: CardInputs) -> list[str]:
    languages = _languages(inputs)
    lines = ["---", "language:"] + [f"- {lang}" for lang in languages]
    return lines + ["library_name: transformers", "pipeline_tag: text-generation",
                    "tags:", *(["- bangla"] if "bn" in languages else []), "- llama", "- causal-lm", "- bangla-tokfair",
                    "---", ""]


def _model_section(inputs: CardInputs) -> list[str]:
    m = inputs.config.model
    c = parameter_counts(m)
    # What the non-embedding count leaves out, in this model's terms (pretrain.model.gpt.ParameterCounts).
    left_out = "the token-embedding table, which is also the output head" if m.tie_embeddings else \
        "the token-embedding table; the output head counted"
    rows = ["## Model", "", "| | |", "|---|---|",
            "| architecture | `LlamaForCausalLM` (pre-norm decoder: RoPE, RMSNorm, SwiGLU, no biases) |",
            f"| parameters | {c.exported_total:,} ({c.exported_non_embedding:,} non-embedding: without {left_out}) |",
            f"| vocabulary | {c.vocab:,} ids, the tokenizer's (`vocab_size` in config.json) |"]
    if c.padded_vocab != c.vocab:
        rows.append(f"| as trained | {c.total:,} parameters ({c.non_embedding:,} non-embedding): the vocabulary "
                    f"tables were padded from {c.vocab:,} to {c.padded_vocab:,} rows (a multiple of 128); the "
                    "padded ids were never predicted and are not exported |")
    return rows + [
        f"| layers / hidden size / heads | {m.n_layer} / {m.n_embd} / {m.n_head} (head dim {m.head_dim}) |",
        f"| SwiGLU width | {m.ffn_hidden} |", f"| context | {m.block_size} tokens |",
        f"| tied embeddings | {'yes' if m.tie_embeddings else 'no'} |", f"| RoPE theta | {m.rope_theta:g} |",
        f"| weights | {inputs.dtype} |", ""]


def _tokenizer_section(inputs: CardInputs) -> list[str]:
    t = inputs.tokenizer
    lines = ["## Tokenizer", "",
             f"`{t.get('name') or t['spec']}`, {t.get('vocab_size', 0):,} ids, sha256 `{t.get('sha256', '')}`; BOS id "
             f"{t.get('bos_id')} is prepended to every document (the exported tokenizer does it too).", ""]
    r = inputs.roles
    if r is not None:
        # Why BOS ends a sequence: pretrain.release.tokenizer.TokenRoles.
        pad = (f"`{r.pad}` (id {r.pad_id}), the tokenizer's pad token" if r.pad_is_own else
               f"`{r.bos}` (id {r.pad_id}): the tokenizer has no pad token, and padded positions are masked out")
        lines += [f"Generation stops at `{r.bos}` too: it is the end-of-sequence token (`eos_token_id` {r.bos_id} in "
                  "config.json and generation_config.json). The training documents were packed back to back, each "
                  "starting with it and none ending with another token, so the model learned to predict it after "
                  "a document's end, the way GPT-2's one `<|endoftext|>` separates documents. Batches are padded "
                  f"on the left (for `generate()`) with {pad}; the tokenizer's `model_max_length` is "
                  f"{inputs.config.seq_len} tokens, the training sequence length. A special token's string in "
                  f"the text (`{r.bos}`) is read as text, as in training (`split_special_tokens`).", ""]
    if inputs.fertility:
        lines += [f"Characters and bytes per token, measured with {inputs.fertility_source}:", "",
                  "| language | chars/token | bytes/token | characters measured |", "|---|---:|---:|---:|"]
        lines += [f"| {lang} | {_num(r['chars_per_token'])} | {_num(r['bytes_per_token'])} | {r['chars']:,} |"
                  for lang, r in inputs.fertility.items()]
    else:
        lines.append(inputs.notes["tokenizer"])
    return lines + [""]


def _data_section(inputs: CardInputs) -> list[str]:
    lines = ["## Training data", ""]
    if inputs.manifest is None:
        return lines + [inputs.notes["data"], ""]
    train = inputs.manifest.split("train")
    total = sum(s.tokens for s in train)
    by_lang: dict[str, int] = {}
    for s in train:
        for lang, n in s.tokens_by_language.items():
            by_lang[lang] = by_lang.get(lang, 0) + n
    lines += [f"The training shards hold {total:,} tokens ({sum(s.documents for s in train):,} documents); "
              "the mixture is set in tokens of this tokenizer (`corpus build --mix`):", "",
              "| language | train tokens | share | validation tokens |", "|---|---:|---:|---:|"]
    for lang in sorted(by_lang):
        val = sum(s.tokens for s in inputs.manifest.split("val", language=lang))
        lines.append(f"| {lang} | {by_lang[lang]:,} | {by_lang[lang] / total:.1%} | {val:,} |")
    sources = [s.get("spec") or s.get("path") or s.get("name") for s in inputs.manifest.sources]
    if any(sources):
        lines += ["", "Sources: " + ", ".join(f"`{s}`" for s in sources if s) + "."]
    return lines + [""]


def _training_section(inputs: CardInputs) -> list[str]:
    c = inputs.config
    o = c.optim
    schedule = (f"linear warmup over {effective_warmup(o, c.train.max_steps)} steps to {o.lr:g}, then "
                f"{SCHEDULES[o.schedule].describe(o)} at step {c.train.max_steps:,}")
    if o.replan_step:
        # A re-plan inside the warmup climbs on to the peak before it decays; say which the run did.
        climb = f"up to {o.lr:g} at step {o.replan_warmup:,}, then " if o.replan_warmup > o.replan_step else ""
        schedule += (f"; re-planned on resume at step {o.replan_step:,} (`--replan-schedule`): from {o.replan_lr:.3g} "
                     f"{climb}down to the floor at step {c.train.max_steps:,}")
    params = parameter_counts(c.model).exported_total
    return ["## Training", "", "| | |", "|---|---|",
            f"| steps done | {inputs.step:,} of {c.train.max_steps:,} planned |",
            f"| tokens seen | {inputs.tokens_seen:,} ({inputs.tokens_seen / params:.3g} per parameter) |",
            f"| batch | {c.train.global_batch_tokens:,} tokens per step, sequences of {c.seq_len} |",
            f"| optimizer | {OPTIMIZERS[o.name].describe(o)}; gradient clip {o.grad_clip} |",
            f"| learning rate | {schedule} |", f"| seed | {c.train.seed} |", ""]


def _table(intro: str, columns: list[str], aligns: str, rows: list[list[str]]) -> list[str]:
    """A paragraph and a markdown table under it; ``aligns`` is one letter a column (l left, r right)."""
    rule = "|" + "|".join("---" if a == "l" else "---:" for a in aligns) + "|"
    return [intro, "", "| " + " | ".join(columns) + " |", rule, *("| " + " | ".join(r) + " |" for r in rows), ""]


def _eval_section(inputs: CardInputs) -> list[str]:
    lines = ["## Evaluation", ""]
    ev = inputs.evaluation
    if not ev:
        return lines + [inputs.notes["eval"], ""]
    if "validation" in ev:
        v = ev["validation"]
        lines += _table(f"Held-out validation split of the training corpus ({v['max_tokens_per_language'] or 'all'} "
                        "targets per language), against the random-init twin (the same model before training):",
                        ["language", "bits/char", "bits/byte", "twin bits/char", "loss / twin loss"], "lrrrr",
                        [[lang, _num(r["model"]["bits_per_char"]), _num(r["model"]["bits_per_byte"]),
                          _num(r["random_init"]["bits_per_char"]), _num(r["loss_ratio"])]
                         for lang, r in v["languages"].items()])
    if "text" in ev:
        t = ev["text"]
        lines += _table("Bits per byte and per character on given texts (`pretrain eval --text`; tokenizer-independent, "
                        f"so comparable with any model scored on the same text; NFC-normalised: {t['normalized']}):",
                        ["language", "text", "bits/byte", "bits/char", "tokens"], "llrrr",
                        [[lang, f"`{Path(r['source']).name}`", _num(r["bits_per_byte"], 4), _num(r["bits_per_char"], 4),
                          f"{r['tokens']:,}"] for lang, r in t["languages"].items()])
    if "tasks" in ev:
        t = ev["tasks"]
        shots = "each task's default" if t["num_fewshot"] is None else t["num_fewshot"]
        lines += _table(f"Downstream tasks with {t['harness']} (HF backend; few-shot: {shots}"
                        + (f"; first {t['limit']} documents per task" if t["limit"] else "") + "):",
                        ["task", "metric", "score", "chance", "documents"], "llrrr",
                        [[name, r["metric"], _num(r["score"]), _num(r["chance"]), str(r["documents"])]
                         for name, r in t["results"].items()])
    return lines


def render(inputs: CardInputs) -> str:
    """The README.md text."""
    m = inputs.config.model
    langs = ", ".join(_languages(inputs)) or "its training languages"
    lines = _header(inputs) + [
        f"# {inputs.name}", "",
        f"A {parameter_counts(m).exported_total / 1e6:.1f}M-parameter causal language model ({langs}) trained from scratch with "
        f"`pretrain` (bangla-tokfair): preset `{inputs.config.model_preset}`, step {inputs.step:,}, "
        f"{_tokens(inputs.tokens_seen)} training tokens.", ""]
    lines += _model_section(inputs) + _tokenizer_section(inputs) + _data_section(inputs)
    lines += _training_section(inputs) + _eval_section(inputs)
    lines += ["## Use", "", "```python", "from transformers import AutoModelForCausalLM, AutoTokenizer",
              f'model = AutoModelForCausalLM.from_pretrained("{inputs.name}")  # this folder',
              f'tok = AutoTokenizer.from_pretrained("{inputs.name}")  # prepends BOS, as in training',
              'batch = tok(["first prompt", "a second, longer prompt"], padding=True, return_tensors="pt")',
              "out = model.generate(**batch, max_new_tokens=100)  # stops early where a document would end",
              "```", "",
              "## Provenance", "",
              f"Exported from checkpoint sha256 `{inputs.checkpoint_sha256}` (step {inputs.step}); `export.json` "
              "beside this file records the rest.", ""]
    return "\n".join(lines)
