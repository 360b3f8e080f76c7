"""Does a tokenizer help a model? The same small GPT trained with each tokenizer on the same number of
tokens (the same FLOPs), at two or more budgets and three seeds, compared by bits per byte on held-out text.

    python benchmarks/bench_model.py --data ../shared/data --out OUT [--vocab-size 8192]
        [--budgets 250000,750000] [--seeds 1,2,3] [--max-chars 3000000]

Tokenizers, trained by ``tokenizers-train`` on the first ``--max-chars`` characters of each Bangla and English
file at the same vocabulary:

* ``naive``: GPT-2's recipe (its ``--naive`` baseline, trained on the default run's sample);
* ``default``: the command's defaults (balance, whole graphemes, phrase merges);
* ``no-phrase``: the same with ``--phrase-fraction 0``: what fair shares and whole graphemes do without
  multi-word tokens.

For each, ``corpus build`` makes shards from the same characters (mixed 50/50 in tokens, the largest budget's
tokens), and ``pretrain launch --config tiny`` trains ``budget / 1024`` steps of 1,024 tokens per seed: the
same model and vocabulary size, so the same FLOPs for the same tokens; each budget runs its own full learning
rate schedule. Every model is scored by ``pretrain eval --text`` on the same held-out text, which no
tokenizer and no shard saw: per language the documents of its largest file after the first ``--max-chars``
characters (up to ``--heldout-chars``), and the Tatoeba bn-en pairs (``bn_tatoeba``, ``en_tatoeba``: the same
sentences in both languages). Bits per byte are the text's total negative log-likelihood in bits over its
UTF-8 bytes, so they compare across tokenizers: one that packs more text into each token wins only if the
model can use it.

The table gives, per tokenizer and budget, the mean over seeds and the spread (max - min); a difference is
read as real only where it exceeds both tokenizers' spreads. Written to OUT: ``results.json``,
``results.md`` (the table) and ``bits_per_byte.png`` (bits per byte against the budget, one panel per text).
Finished steps are kept, so the same command after an interruption goes on where it stopped; once the shard
sets are built, commands with other ``--seeds`` may run beside it on the same OUT (one per core), and a last
command with every seed then only gathers the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import fertility
from common.fileio import atomic_write_text, read_json, write_json
from corpus.read.normalize import normalize
from fertility.text import TextSource, iter_documents

BN = ["bn/blog-sachalayatan.txt.gz", "bn/poems-pd-banglakosh.txt.gz", "bn/literature-bnarchive.txt.gz"]
EN = ["en/wiki-en-chinapedia.txt.gz"]
TATOEBA = {"bn_tatoeba": "parallel/tatoeba-bn-en/ben_Beng.txt.gz", "en_tatoeba": "parallel/tatoeba-bn-en/eng_Latn.txt.gz"}
BATCH_TOKENS = 1024  # tiny's global batch
TOKENIZERS = ("naive", "default", "no-phrase")


def sh(*args: str) -> None:
    subprocess.run([sys.executable, "-m", *args], check=True)


def train_tokenizers(data: Path, out: Path, vocab_size: int, max_chars: int) -> dict[str, Path]:
    texts = [a for f in BN for a in ("--text", f"bn={data / f}")] + [a for f in EN for a in ("--text", f"en={data / f}")]
    common = [*texts, "--vocab-size", str(vocab_size), "--max-chars-per-source", str(max_chars), "--no-progress"]
    if not (out / "tok-default" / "tokenizer.json").is_file():
        sh("tokenizers_train", *common, "--naive", "--out", str(out / "tok-default"))
    if not (out / "tok-no-phrase" / "tokenizer.json").is_file():
        sh("tokenizers_train", *common, "--phrase-fraction", "0", "--out", str(out / "tok-no-phrase"))
    return {"naive": out / "tok-default" / "naive" / "tokenizer.json",
            "default": out / "tok-default" / "tokenizer.json",
            "no-phrase": out / "tok-no-phrase" / "tokenizer.json"}


def write_heldout(data: Path, out: Path, max_chars: int, heldout_chars: int) -> dict[str, Path]:
    """Per language, whole documents of its largest file after the first ``max_chars`` characters (which the
    tokenizers and shards read), up to ``heldout_chars``; and the Tatoeba pairs as they are."""
    texts: dict[str, Path] = {}
    folder = out / "heldout"
    folder.mkdir(parents=True, exist_ok=True)
    for lang, files in (("bn", BN), ("en", EN)):
        path = folder / f"{lang}.txt"
        if not path.is_file():
            seen, kept, docs = 0, 0, []
            for doc in (d.text for d in iter_documents(TextSource(lang, str(data / files[0])))):
                seen += len(doc)
                if seen <= max_chars:
                    continue
                docs.append(doc)
                kept += len(doc)
                if kept >= heldout_chars:
                    break
            if kept < heldout_chars // 2:
                raise SystemExit(f"bench_model: {data / files[0]} has too little text after the first "
                                 f"{max_chars:,} characters for a held-out set (--max-chars)")
            atomic_write_text(path, "\n".join(d.replace("\n", " ") for d in docs) + "\n")
        texts[lang] = path
    for label, rel in TATOEBA.items():
        texts[label] = data / rel
    return texts


def chars_per_token(tokenizer: Path, texts: dict[str, Path]) -> dict[str, float]:
    """Characters per token on each text, in the canonical form the model's scores read it in."""
    tok = fertility.load_tokenizer(str(tokenizer))
    out = {}
    for label, path in texts.items():
        docs = [normalize(d.text) for d in iter_documents(TextSource(label, str(path)))]
        out[label] = sum(map(len, docs)) / sum(map(len, tok.encode_ids(docs)))
    return out


def build_corpus(data: Path, tokenizer: Path, out: Path, tokens: int, max_chars: int) -> None:
    if (out / "manifest.json").is_file():
        return
    sources = [f"--source=bn={data / f}" for f in BN] + [f"--source=en={data / f}" for f in EN]
    sh("corpus", "build", "--tokenizer", str(tokenizer), *sources, "--mix", "bn=0.5,en=0.5", "--tokens", str(tokens),
       "--max-epochs", "50", "--val-tokens", "20000", "--max-chars", str(max_chars), "--out", str(out),
       "--no-progress")


def train_and_score(corpus: Path, run: Path, steps: int, seed: int, texts: dict[str, Path]) -> dict[str, float]:
    # Beside the run, not in it: an output file never lies inside an input folder (`pretrain eval --run RUN`).
    scores = run.with_name(f"{run.name}.heldout.json")
    if not scores.is_file():
        from pretrain.train.checkpoint import latest_checkpoint, sidecar

        last = latest_checkpoint(run) if run.is_dir() else None
        if last is None or read_json(sidecar(last))["step"] != steps:
            if last is None and run.exists():
                shutil.rmtree(run)  # a launch that stopped before its first checkpoint: start again
            sh("pretrain", "launch", "--config", "tiny", "--data", str(corpus), "--out", str(run),
               *(["--resume"] if last is not None else []),
               "--max-steps", str(steps), "--device", "cpu", "--no-supervisor", "--no-eval",
               "--set", f"train.seed={seed}", "--set", "train.preflight_steps=1", "--set", "train.tensorboard=no",
               "--set", f"train.checkpoint_interval={steps}", "--set", f"train.eval_interval={steps}")
        sh("pretrain", "eval", "--run", str(run), *[a for k, p in texts.items() for a in ("--text", f"{k}={p}")],
           "--samples", "0", "--out", str(scores), "--overwrite", "--device", "cpu")
    report = json.loads(scores.read_text())
    return {k: v["bits_per_byte"] for k, v in report["text"]["languages"].items()}


def summarise(bits: dict[str, dict[int, list[dict[str, float]]]]) -> dict:
    """Per tokenizer, budget and text: mean, spread (max - min) and the seeds' values."""
    out: dict = {}
    for name, budgets in bits.items():
        for budget, runs in budgets.items():
            for label in runs[0]:
                values = [r[label] for r in runs]
                out.setdefault(name, {}).setdefault(str(budget), {})[label] = {
                    "mean": statistics.fmean(values), "spread": max(values) - min(values), "seeds": values}
    return out


def table(summary: dict, cpt: dict[str, dict[str, float]], labels: list[str]) -> str:
    head = "| tokenizer | budget (tokens) | " + " | ".join(f"{k} bits/byte" for k in labels) + " | " + \
        " | ".join(f"{k} chars/token" for k in labels) + " |"
    rows = [head, "|---|---:|" + "---:|" * (2 * len(labels))]
    for name, budgets in summary.items():
        for budget, per in budgets.items():
            rows.append(f"| {name} | {int(budget):,} | " + " | ".join(
                f"{per[k]['mean']:.4f} ± {per[k]['spread'] / 2:.4f}" for k in labels) + " | " + " | ".join(
                f"{cpt[name][k]:.2f}" for k in labels) + " |")
    return "\n".join(rows)


def verdicts(summary: dict, labels: list[str], a: str, b: str) -> list[str]:
    """Where ``a`` and ``b`` differ by more than both seeds' spreads (half ranges added), per budget and text."""
    lines = []
    for budget in summary[a]:
        for k in labels:
            x, y = summary[a][budget][k], summary[b][budget][k]
            gap = x["mean"] - y["mean"]
            real = abs(gap) > (x["spread"] + y["spread"]) / 2
            lines.append(f"{budget} tokens, {k}: {a} {x['mean']:.4f} vs {b} {y['mean']:.4f} "
                         f"({gap / y['mean']:+.1%}; {'beyond' if real else 'within'} the seeds' spread)")
    return lines


def plot(summary: dict, labels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(labels), figsize=(4 * len(labels), 3.4), squeeze=False)
    for ax, k in zip(axes[0], labels, strict=True):
        for name, budgets in summary.items():
            xs = [int(b) for b in budgets]
            ys = [budgets[b][k]["mean"] for b in budgets]
            lo = [budgets[b][k]["mean"] - min(budgets[b][k]["seeds"]) for b in budgets]
            hi = [max(budgets[b][k]["seeds"]) - budgets[b][k]["mean"] for b in budgets]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
        ax.set_xscale("log")
        ax.set_title(k)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("bits per byte (held out)")
    axes[0][0].legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="folder with bn/, en/ and parallel/ (the shared data)")
    p.add_argument("--out", type=Path, required=True, help="a work folder; rerun the same command to resume")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--max-chars", type=int, default=3_000_000, help="characters read from each file")
    p.add_argument("--heldout-chars", type=int, default=200_000, help="held-out characters per language")
    p.add_argument("--budgets", default="250000,750000", help="training tokens, comma-separated")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated")
    args = p.parse_args()
    budgets = sorted(int(float(b)) for b in args.budgets.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    tokenizers = train_tokenizers(args.data, args.out, args.vocab_size, args.max_chars)
    texts = write_heldout(args.data, args.out, args.max_chars, args.heldout_chars)
    labels = list(texts)
    cpt = {name: chars_per_token(tok, texts) for name, tok in tokenizers.items()}
    for name in TOKENIZERS:  # every shard set first: commands for other seeds may then run beside this one
        build_corpus(args.data, tokenizers[name], args.out / name / "corpus", budgets[-1], args.max_chars)
    bits: dict[str, dict[int, list[dict[str, float]]]] = {}
    for name in TOKENIZERS:
        for budget in budgets:
            for seed in seeds:
                t = time.time()
                scores = train_and_score(args.out / name / "corpus", args.out / name / f"run-{budget}-seed{seed}",
                                         budget // BATCH_TOKENS, seed, texts)
                bits.setdefault(name, {}).setdefault(budget, []).append(scores)
                print(f"{name} {budget:,} tokens seed {seed}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
                      + f" ({time.time() - t:.0f} s)", file=sys.stderr, flush=True)
    summary = summarise(bits)
    md = (f"`tiny` GPT (pretrain preset), vocabulary {args.vocab_size:,}, {len(seeds)} seeds per cell: held-out "
          "bits per byte, mean ± half the seeds' range (lower is better), and the tokenizer's chars/token on "
          "the same text\n\n" + table(summary, cpt, labels) + "\n\n"
          + "\n".join(f"* {v}" for pair in (("default", "naive"), ("default", "no-phrase"))
                      for v in verdicts(summary, labels, *pair)) + "\n")
    atomic_write_text(args.out / "results.md", md)
    write_json(args.out / "results.json", {"arguments": {k: str(v) for k, v in vars(args).items()},
                                            "chars_per_token": cpt, "bits_per_byte": summary,
                                            "seconds": round(time.time() - started, 1)})
    plot(summary, labels, args.out / "bits_per_byte.png")
    print(md)


if __name__ == "__main__":
    main()
