"""Does a tokenizer help a model? The `tiny` GPT trained with each tokenizer on the same text for the same
compute, compared by validation bits per character per language.

    python benchmarks/bench_model.py --data ../shared/data --out OUT [--vocab-size 8192] [--steps 150]

Three tokenizers are trained by ``tokenizers-train`` on the same sample at the same vocabulary and shares:
GPT-2's recipe (``naive``), the script-aware split with byte-level merges (``script-aware``,
``--whole-graphemes off``) and with whole-grapheme merges (``whole-grapheme``, the default). For each,
``corpus build`` makes shards from the same files (the same characters read, mixed 50/50 in tokens) and
``pretrain launch --config tiny`` trains for the same number of steps of the same global batch (the same
vocabulary size, so the same FLOPs); ``pretrain eval`` measures every validation token. Bits per character
are tokenizer-independent, so a tokenizer that packs more text into the same tokens wins only if the model
can use it. The validation documents are a seeded draw of whole documents up to a token budget, so each
tokenizer's set overlaps the others' but is not identical.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from fertility.text import TextSource
from tokenizers_train import backends, run

BN = ["bn/blog-sachalayatan.txt.gz", "bn/poems-pd-banglakosh.txt.gz", "bn/literature-bnarchive.txt.gz"]
EN = ["en/wiki-en-chinapedia.txt.gz"]


def train_tokenizers(data: Path, out: Path, vocab_size: int, max_chars: int) -> dict[str, Path]:
    texts = [TextSource("bn", str(data / f)) for f in BN] + [TextSource("en", str(data / f)) for f in EN]
    made = {}
    for name, whole in (("whole-grapheme", True), ("script-aware", False)):
        config = run.TrainingRun(texts=texts, out=out / f"tok-{name}", shares={"bn": 0.5, "en": 0.5},
                                 max_chars_per_source=max_chars, whole_graphemes=whole, naive=not whole,
                                 train=backends.TrainConfig(vocab_size=vocab_size, phrase_fraction=0.25,
                                                            show_progress=False), progress=False)
        if not (config.out / "tokenizer.json").is_file():
            run.run(config)
        made[name] = config.out / "tokenizer.json"
    made = {"naive": out / "tok-script-aware" / "naive" / "tokenizer.json", **made}
    return dict(sorted(made.items(), key=lambda kv: ["naive", "script-aware", "whole-grapheme"].index(kv[0])))


def sh(*args: str) -> None:
    subprocess.run([sys.executable, "-m", *args], check=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="folder with bn/ and en/ (the shared data or data/sample)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--max-chars", type=int, default=3_000_000, help="characters read from each file")
    p.add_argument("--tokens", type=int, default=2_000_000, help="training tokens in the shards")
    p.add_argument("--val-tokens", type=int, default=50_000, help="validation tokens per language")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--global-batch-tokens", type=int, default=2048)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizers = train_tokenizers(args.data, args.out, args.vocab_size, args.max_chars)
    rows = {}
    for name, tok in tokenizers.items():
        corpus, pretrain = args.out / name / "corpus", args.out / name / "run"
        started = time.time()
        if not (corpus / "manifest.json").is_file():
            sources = [f"--source=bn={args.data / f}" for f in BN] + [f"--source=en={args.data / f}" for f in EN]
            sh("corpus", "build", "--tokenizer", str(tok), *sources, "--mix", "bn=0.5,en=0.5",
               "--tokens", str(args.tokens), "--max-epochs", "50", "--val-tokens", str(args.val_tokens),
               "--max-chars", str(args.max_chars), "--out", str(corpus), "--no-progress")
        if not (pretrain / "eval.json").is_file():
            sh("pretrain", "launch", "--config", "tiny", "--data", str(corpus), "--out", str(pretrain),
               "--max-steps", str(args.steps), "--global-batch-tokens", str(args.global_batch_tokens),
               # one forward pass per step: tiny's context is 128 tokens
               "--micro-batch", str(max(1, args.global_batch_tokens // 128)), "--device", "cpu",
               "--no-supervisor", "--no-eval",
               "--set", "train.preflight_steps=1", "--set", "train.tensorboard=no",
               "--set", f"train.checkpoint_interval={args.steps}", "--set", f"train.eval_interval={args.steps}")
            sh("pretrain", "eval", "--run", str(pretrain), "--max-tokens", "0", "--samples", "0", "--device", "cpu")
        report = json.loads((pretrain / "eval.json").read_text())
        rows[name] = {lang: m["model"]["bits_per_char"] for lang, m in report["languages"].items()}
        print(f"{name}: {rows[name]} ({time.time() - started:.0f} s)", flush=True)
    langs = sorted(next(iter(rows.values())))
    print(f"\n`tiny` GPT, {args.steps} steps x {args.global_batch_tokens} tokens, vocabulary {args.vocab_size}: "
          "validation bits per character (lower is better)\n")
    print("| tokenizer | " + " | ".join(langs) + " |")
    print("|---|" + "---:|" * len(langs))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[k]:.3f}" for k in langs) + " |")


if __name__ == "__main__":
    main()
