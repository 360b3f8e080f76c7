"""Does `tiny` with its default budget learn more than token frequencies? Its validation loss against a
unigram model of its own training tokens (goal: at least 0.25 nats below, in every language).

    python benchmarks/tiny_vs_unigram.py --vocab-size 64000 --out OUT [--data DIR] [--set section.field=value ...]
    python benchmarks/tiny_vs_unigram.py --vocab-size 64000 --out OUT --data ../shared/data \
        --tokenizer-chars 3000000 --corpus-chars 6000000 --tokens 4e6 --shard-tokens 1000000

The pipeline is the demo's (scripts/demo.d): ``tokenizers-train`` at ``--vocab-size`` on data/sample (or on
``--data``, a folder with the same bn/ and en/ files, e.g. ../shared/data, whose Bangla blog text is used
too), ``corpus build`` of the same 70/30 Bangla/English mixture in tokens, then ``pretrain launch --config
tiny`` with nothing but the preset (``--set`` adds overrides). The second command is the 64k measurement of
benchmarks/results/2026-12-01-tiny-budget: a 64,000-id vocabulary needs more text than data/sample has (see there). The unigram model is the add-one (Laplace) estimate from the counts of every
training token, scored on exactly the validation targets the run's last validation scored (the first
``data.eval_tokens`` text tokens of each language, BOS never a target, `pretrain.train.validation.validation_documents`),
so both numbers are nats per token on the same tokens. Prints, per language, the run's loss, the unigram's and the margin, and the run's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pretrain.config import RunConfig
from pretrain.train.data import open_dataset
from pretrain.train.validation import validation_documents

ROOT = Path(__file__).resolve().parents[1]
# In this order; a file ``--data`` lacks is left out (data/sample has no blog text).
SOURCES = {"bn": ["bn/literature-bnarchive.txt.gz", "bn/poems-pd-banglakosh.txt.gz", "bn/blog-sachalayatan.txt.gz"],
           "en": ["en/wiki-en-chinapedia.txt.gz"]}
MARGIN = 0.25  # nats per token


def _run(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", *args], check=True, env=env, cwd=ROOT)


def build_shards(text: Path, vocab_size: int, out: Path, *, tokenizer_chars: int = 600_000,
                 corpus_chars: int = 400_000, tokens: float = 6e5, shard_tokens: int = 200_000) -> Path:
    """The demo's tokenizer (steps 2) and shards (step 3) at ``vocab_size``; returns the shard folder."""
    sources = [f"{lang}={text / f}" for lang, files in SOURCES.items() for f in files if (text / f).is_file()]
    _run("tokenizers_train", *[a for s in sources for a in ("--text", s)], "--vocab-size", str(vocab_size),
         "--max-chars-per-source", str(tokenizer_chars), "--shares", "bn=0.65,en=0.35", "--no-progress",
         "--out", str(out / "tok"))
    _run("corpus", "build", "--tokenizer", str(out / "tok" / "tokenizer.json"),
         *[a for s in sources for a in ("--source", s)], "--mix", "bn=0.7,en=0.3", "--tokens", str(int(tokens)),
         "--max-epochs", "4", "--val-tokens", "20000", "--shard-tokens", str(shard_tokens), "--max-chars",
         str(corpus_chars), "--no-progress", "--out", str(out / "shards"))
    return out / "shards"


def train_tiny(shards: Path, run: Path, overrides: list[str]) -> float:
    """`pretrain launch --config tiny` with the preset's budget; returns the wall seconds."""
    start = time.perf_counter()
    _run("pretrain", "launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--no-supervisor",
         "--no-eval", "--set", "train.tensorboard=no", *[a for o in overrides for a in ("--set", o)])
    return time.perf_counter() - start


def unigram_losses(shards: Path, eval_tokens: int) -> dict[str, float]:
    """Per language, the add-one unigram model of the training tokens on the run's validation targets."""
    ds = open_dataset(shards)
    vocab = ds.manifest.tokenizer.vocab_size
    counts = np.bincount(ds.train.window(0, len(ds.train)), minlength=vocab).astype(np.float64)
    log_p = np.log((counts + 1) / (counts.sum() + vocab))
    bos = ds.manifest.tokenizer.bos_id
    return {lang: float(-log_p[np.concatenate(validation_documents(stream, bos, eval_tokens))].mean())
            for lang, stream in ds.val.items()}


def compare(shards: Path, run: Path) -> dict[str, dict[str, float]]:
    """The run's last validation against the unigram, per language: loss, unigram, margin."""
    cfg = RunConfig.from_dict(json.loads((run / "config.json").read_text()))
    last = [json.loads(line) for line in (run / "val.jsonl").read_text().splitlines()][-1]
    unigram = unigram_losses(shards, cfg.data.eval_tokens)
    return {lang: {"step": last["step"], "loss": loss, "unigram": unigram[lang], "margin": unigram[lang] - loss}
            for lang, loss in last["languages"].items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab-size", type=int, default=64000)
    p.add_argument("--out", type=Path, required=True, help="a new folder for the tokenizer, shards and run")
    p.add_argument("--data", type=Path, default=ROOT / "data" / "sample", help="folder with the bn/ and en/ texts")
    p.add_argument("--tokenizer-chars", type=int, default=600_000, help="tokenizers-train --max-chars-per-source")
    p.add_argument("--corpus-chars", type=int, default=400_000, help="corpus build --max-chars")
    p.add_argument("--tokens", type=float, default=6e5, help="corpus build --tokens")
    p.add_argument("--shard-tokens", type=int, default=200_000, help="corpus build --shard-tokens")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for the run")
    args = p.parse_args()
    shards = build_shards(args.data, args.vocab_size, args.out, tokenizer_chars=args.tokenizer_chars,
                          corpus_chars=args.corpus_chars, tokens=args.tokens, shard_tokens=args.shard_tokens)
    seconds = train_tiny(shards, args.out / "run", args.set)
    print(f"`tiny` on a {args.vocab_size:,}-id tokenizer: {seconds:.0f} s for the launch "
          f"(load average {os.getloadavg()[0]:.2f} at the end)")
    for lang, r in compare(shards, args.out / "run").items():
        verdict = "ok" if r["margin"] >= MARGIN else f"FAILS the {MARGIN} margin"
        print(f"  {lang}: validation loss {r['loss']:.3f} at step {r['step']}, unigram {r['unigram']:.3f}, "
              f"{r['margin']:+.3f} nats below: {verdict}")


if __name__ == "__main__":
    main()
