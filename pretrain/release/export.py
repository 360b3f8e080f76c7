"""``pretrain export``: a trained checkpoint as a Hugging Face folder that ``transformers`` loads.

    pretrain export --checkpoint RUN/checkpoints/step_00001000.pt --out DIR [--tokenizer SPEC] [--dtype bf16]

The folder holds ``config.json``, ``generation_config.json`` and ``model.safetensors`` of a ``LlamaForCausalLM``
(the weights converted by :mod:`pretrain.model.hf_llama`, exact), the tokenizer (``tokenizer.json`` +
``tokenizer_config.json``), ``export.json`` (where it came from) and ``README.md``, the model card
(:mod:`pretrain.release.model_card`). transformers 4.57 and later and 5 load it the same way
(tests/pretrain/test_export_compat.py loads it with the oldest and the newest). Users then evaluate with their
usual tools::

    model = AutoModelForCausalLM.from_pretrained(DIR); tok = AutoTokenizer.from_pretrained(DIR)

The tokenizer is the one named in the checkpoint (or ``--tokenizer``), checked against the sha256 the model
was trained with. Its post-processor prepends BOS, because every training document started with BOS:
``tok(text)`` gives the ids the model saw in training. BOS is the end-of-sequence token too, so ``generate()``
stops where the model ends a document (`pretrain.release.tokenizer.TokenRoles` says why). Tokenizers in ``tokenizers`` format (HF
``tokenizer.json``, GPT-2 ``vocab.json`` + ``merges.txt``) are exported; sentencepiece and tiktoken
files are refused with a clear error (convert them to a ``tokenizer.json`` first).

The folder is built beside ``--out`` and renamed into place at the end, so a failed export leaves nothing
half-written. ``--out`` follows the one --out policy (`common.outdir`): a new or empty folder, or with
``--overwrite`` an earlier export (a folder this project wrote); any other folder is never replaced.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from common import paths
from common.fileio import atomic_write_text, file_sha256, umask, write_json
from common.outdir import output_dir, publish_dir, staging_dir
from pretrain.model.gpt import GPT, GPTConfig, parameter_counts
from pretrain.model.hf_llama import to_hf
from pretrain.release.tokenizer import ExportError, export_tokenizer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def model_from_checkpoint(state: dict[str, Any], path: Path) -> GPT:
    """Our model with the weights of a loaded checkpoint (written by `pretrain.train.trainer.Trainer`)."""
    try:
        cfg = GPTConfig(**state["config"]["model"])
        weights = state["model"]
    except (KeyError, TypeError) as e:
        raise ExportError(f"{path}: not a pretrain checkpoint (missing or bad {e})") from None
    model = GPT(cfg)
    model.load_state_dict(weights)
    return model


def export_checkpoint(checkpoint: str | Path, out: str | Path, *, tokenizer: str | None = None,
                      dtype: str = "fp32", eval_json: str | Path | None = None, data: str | None = None,
                      overwrite: bool = False) -> Path:
    """Write the HF folder for ``checkpoint`` at ``out`` (new or empty, or with ``overwrite`` an earlier
    export); return ``out``.
    Its README.md is the model card (:mod:`pretrain.release.model_card`), from ``eval_json`` (default RUN/eval.json)
    and the shard manifest in ``data`` (default the run's)."""
    checkpoint, out = Path(checkpoint), Path(out)
    inputs = [p for p in (checkpoint, eval_json, data) if p]
    with output_dir(out, "pretrain export", overwrite=overwrite, inputs=inputs):
        return _export(checkpoint, out, tokenizer=tokenizer, dtype=dtype, eval_json=eval_json, data=data)


def _export(checkpoint: Path, out: Path, *, tokenizer: str | None, dtype: str, eval_json: str | Path | None,
            data: str | None) -> Path:
    from transformers import GenerationConfig

    from pretrain.config import RunConfig
    from pretrain.release import model_card
    from pretrain.train.checkpoint import load_checkpoint

    model_card.check_card_inputs(Path(eval_json) if eval_json else None, data)
    if dtype not in DTYPES:
        raise ExportError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    state = load_checkpoint(checkpoint)  # verifies the checksum
    model = model_from_checkpoint(state, checkpoint)
    unmapped = [f"{k}={getattr(model.cfg, k)}" for k in ("qk_norm", "logit_softcap") if getattr(model.cfg, k)]
    if unmapped:
        raise ExportError(f"{checkpoint}: model.{', model.'.join(unmapped)} has no LlamaForCausalLM equivalent; "
                          "export supports models trained without qk_norm and logit_softcap")
    info = state.get("tokenizer") or {}
    spec = tokenizer or info.get("spec")
    if not spec:
        raise ExportError(f"{checkpoint}: names no tokenizer; pass --tokenizer")
    tok = export_tokenizer(spec, info.get("sha256", ""), info.get("bos_id"))
    roles = tok.roles
    hf = to_hf(model, bos_id=roles.bos_id, eos_id=roles.bos_id, pad_id=roles.pad_id,  # see TokenRoles
               use_cache=True).to(DTYPES[dtype])
    hf.generation_config = GenerationConfig(bos_token_id=roles.bos_id, eos_token_id=roles.bos_id,
                                            pad_token_id=roles.pad_id)
    sha256 = file_sha256(checkpoint)
    card = model_card.render(model_card.gather(state, name=out.name, checkpoint=checkpoint, checkpoint_sha256=sha256,
                                               tokenizer_spec=spec, tokenizer_name=tok.name, dtype=dtype, roles=roles,
                                               eval_json=Path(eval_json) if eval_json else None, data=data))

    with staging_dir(out) as staging:
        hf.save_pretrained(staging)
        tok.save(staging, RunConfig.from_dict(state["config"]).seq_len)
        provenance = {"checkpoint": str(checkpoint.resolve()), "checkpoint_sha256": sha256,
                      "step": state.get("step"), "tokenizer": {**info, "spec": spec, "name": tok.name},
                      "special_tokens": {"bos": roles.bos, "eos": roles.bos, "pad": roles.pad}, "dtype": dtype,
                      "parameters": asdict(parameter_counts(model.cfg)),
                      "architecture": "LlamaForCausalLM", "torch": torch.__version__,
                      "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        write_json(staging / "export.json", provenance)
        atomic_write_text(staging / "README.md", card)
        for path in staging.iterdir():  # safetensors writes its file 0600: give each file ordinary permissions
            if path.is_file():
                path.chmod(0o666 & ~umask())
        publish_dir(staging, out, command="pretrain export")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="CHECKPOINT", required=True, type=paths.input_file, help="a checkpoint file, e.g. RUN/checkpoints/best.pt")
    p.add_argument("--out", required=True, metavar="DIR", type=paths.output_dir,
                   help="the folder to write: new or empty, or an earlier export with --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export in --out")
    p.add_argument("--tokenizer", metavar="SPEC", type=paths.name_or_path, help="tokenizer spec (default: the one the checkpoint names)")
    p.add_argument("--dtype", choices=list(DTYPES), default="fp32", help="dtype of the saved weights")
    p.add_argument("--eval", metavar="PATH", type=paths.input_file, help="eval.json for the model card (default: RUN/eval.json of the checkpoint's run)")
    p.add_argument("--data", metavar="DIR", type=paths.input_folder, help="shard directory whose manifest the card reads (default: the run's)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (none are drawn either when stderr is not a terminal)")


def run(args: argparse.Namespace) -> int:
    """Export from parsed ``pretrain export`` arguments."""
    out = export_checkpoint(args.checkpoint, args.out, tokenizer=args.tokenizer, dtype=args.dtype,
                            eval_json=args.eval, data=args.data, overwrite=args.overwrite)
    print(f"wrote {out} (LlamaForCausalLM + tokenizer); load it with "
          f"transformers.AutoModelForCausalLM.from_pretrained({str(out)!r})")
    return 0
