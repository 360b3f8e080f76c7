"""Does a tokenizer help a model? The same small GPT trained with each tokenizer on the same number of
tokens (the same FLOPs), at two or more budgets and three seeds, compared by bits per byte on held-out text.

    python benchmarks/bench_model.py --data ../shared/data --out OUT [--vocab-sizes 64000,8192]
        [--budgets 250000,750000] [--seeds 1,2,3] [--max-chars 3000000]

Tokenizers, trained by ``tokenizers-train`` on the first ``--max-chars`` characters of each Bangla and English
file, at each of ``--vocab-sizes`` (each in its own folder, OUT/vocab-N):

* ``naive``: GPT-2's recipe (its ``--naive`` baseline, trained on the default run's sample);
* ``default``: the command's defaults (balance, whole graphemes, phrase merges);
* ``no-phrase``: the same with ``--phrase-fraction 0``: what fair shares and whole graphemes do without
  multi-word tokens.

For each, ``corpus build`` makes shards from the same characters (mixed 50/50 in tokens, the largest budget's
tokens), and ``pretrain launch --config tiny`` trains ``budget / 1024`` steps of 1,024 tokens per seed: the
same model and vocabulary size, so the same FLOPs for the same tokens (the table gives each row's training FLOPs,
the run's own FLOPs per token times its tokens; they include the vocabulary's output head, so they compare only
within one vocabulary); each budget runs its own full learning rate schedule. Every model is scored by
``pretrain eval --text`` on the same held-out text, which no tokenizer and no shard saw: per language the
documents of its largest file after the first ``--max-chars`` characters (up to ``--heldout-chars``), and the
Tatoeba bn-en pairs (``bn_tatoeba``, ``en_tatoeba``: the same sentences in both languages). Bits per byte are
the text's total negative log-likelihood in bits over its UTF-8 bytes, so they compare across tokenizers: one
that packs more text into each token wins only if the model can use it. ``mean`` is the mean of a seed's bn
and en bits per byte, ``tatoeba_mean`` the same on Tatoeba.

The table gives, per vocabulary, tokenizer and budget, the mean over seeds and the spread (max - min); a
difference is read as real only where it exceeds both tokenizers' spreads. Per vocabulary and budget a verdict
says whether the default costs English (en) anything against the naive recipe. Written to OUT: ``results.json``,
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
MEANS = {"mean": ("bn", "en"), "tatoeba_mean": ("bn_tatoeba", "en_tatoeba")}  # per seed, then over seeds


def sh(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", *args], check=True, env=None if env is None else {**os.environ, **env})


def numbers(text: str) -> list[int]:
    """A comma-separated list of positive whole numbers (``1e5`` allowed), for argparse."""
    try:
        values = [int(float(x)) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, got {text!r}")
    return values


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
    """Held-out bits per byte of each text, and their means (``MEANS``), for the run's last checkpoint."""
    # Beside the run, not in it: an output file never lies inside an input folder.
    scores = run.with_name(f"{run.name}.heldout.json")
    if not scores.is_file():
        from pretrain.train.checkpoint import latest_checkpoint, sidecar

        last = latest_checkpoint(run) if run.is_dir() else None
        if last is None or read_json(sidecar(last))["step"] != steps:
            if last is None and run.exists():
                shutil.rmtree(run)  # a launch that stopped before its first checkpoint: start again
            # data.eval_tokens: the launch's validation at its checkpoint, which no figure here reads, took 44 s of
            # a 285-s 100-step run at 64,000 ids with tiny's 16,384 tokens per language.
            sh("pretrain", "launch", "--config", "tiny", "--data", str(corpus), "--out", str(run),
               *(["--resume"] if last is not None else []),
               "--max-steps", str(steps), "--device", "cpu", "--no-supervisor", "--no-eval",
               "--set", f"train.seed={seed}", "--set", "train.preflight_steps=1", "--set", "train.tensorboard=no",
               "--set", f"train.checkpoint_interval={steps}", "--set", f"train.eval_interval={steps}",
               "--set", "data.eval_tokens=2048")
        # --checkpoint, not --run: the run's validation split against its random-init twin is not used here; and
        # one thread, as the launch has (pretrain.train.hardware.cpu_threads). Together they took a 64,000-id
        # model's scores from 332 s to 104 s, the same figures to the last digit.
        sh("pretrain", "eval", "--checkpoint", str(latest_checkpoint(run)),
           *[a for k, p in texts.items() for a in ("--text", f"{k}={p}")],
           "--out", str(scores), "--overwrite", "--device", "cpu", env={"OMP_NUM_THREADS": "1"})
    report = json.loads(scores.read_text())
    return with_means({k: v["bits_per_byte"] for k, v in report["text"]["languages"].items()})


def with_means(bits: dict[str, float]) -> dict[str, float]:
    return {**bits, **{m: statistics.fmean(bits[k] for k in parts) for m, parts in MEANS.items()}}


def training_flops(run: Path, steps: int) -> float:
    """The run's training FLOPs: its FLOPs per token as its preflight recorded them (`GPT.flops_per_token`: 6N,
    N counting the tied output head at the padded vocabulary, plus attention) times the tokens of its steps."""
    return read_json(run / "preflight.json")["model"]["flops_per_token"] * steps * BATCH_TOKENS


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


def table(summaries: dict[str, dict], cpt: dict[str, dict[str, dict[str, float]]],
          flops: dict[str, dict[str, dict[str, float]]], labels: list[str]) -> str:
    """One row per vocabulary, tokenizer and budget (``summaries``: per vocabulary, :func:`summarise`'s), rows
    grouped by vocabulary: training FLOPs, bits per byte of ``labels``, chars/token of the texts ``cpt`` has."""
    texts = list(next(iter(next(iter(cpt.values())).values())))
    head = "| vocabulary | tokenizer | budget (tokens) | training FLOPs | " + \
        " | ".join(f"{k} bits/byte" for k in labels) + " | " + " | ".join(f"{k} chars/token" for k in texts) + " |"
    rows = [head, "|---:|---|---:|---:|" + "---:|" * (len(labels) + len(texts))]
    for vocab, summary in summaries.items():
        for name, budgets in summary.items():
            for budget, per in budgets.items():
                rows.append(f"| {int(vocab):,} | {name} | {int(budget):,} | {flops[vocab][name][budget]:.3g} | "
                            + " | ".join(f"{per[k]['mean']:.4f} ± {per[k]['spread'] / 2:.4f}" for k in labels)
                            + " | " + " | ".join(f"{cpt[vocab][name][k]:.2f}" for k in texts) + " |")
    return "\n".join(rows)


def compare(x: dict, y: dict) -> tuple[float, bool]:
    """``x``'s mean relative to ``y``'s, and whether they differ by more than both seeds' spreads (half ranges
    added)."""
    gap = x["mean"] - y["mean"]
    return gap / y["mean"], abs(gap) > (x["spread"] + y["spread"]) / 2


def verdicts(summary: dict, labels: list[str], a: str, b: str) -> list[str]:
    """Where ``a`` and ``b`` differ by more than both seeds' spreads (half ranges added), per budget and text."""
    lines = []
    for budget in summary[a]:
        for k in labels:
            x, y = summary[a][budget][k], summary[b][budget][k]
            rel, real = compare(x, y)
            lines.append(f"{budget} tokens, {k}: {a} {x['mean']:.4f} vs {b} {y['mean']:.4f} "
                         f"({rel:+.1%}; {'beyond' if real else 'within'} the seeds' spread)")
    return lines


def english_cost(summary: dict, vocab: str, a: str = "default", b: str = "naive", text: str = "en") -> list[str]:
    """Per budget, whether ``a`` costs English (held-out ``text``) bits per byte against ``b``: a cost or a gain
    only beyond both seeds' spreads."""
    lines = []
    for budget in summary[a]:
        x, y = summary[a][budget][text], summary[b][budget][text]
        rel, real = compare(x, y)
        what = ("within the seeds' spread: no cost the seeds can show" if not real else
                f"beyond the seeds' spread: {a} costs English {rel:.1%}" if rel > 0 else
                f"beyond the seeds' spread: {a} is {-rel:.1%} better for English")
        lines.append(f"vocabulary {int(vocab):,}, {int(budget):,} tokens, {text}: {a} {x['mean']:.4f} vs {b} "
                     f"{y['mean']:.4f} bits/byte ({rel:+.1%}), {what}")
    return lines


def plot(summaries: dict[str, dict], labels: list[str], path: Path) -> None:
    """One row of panels per vocabulary, one panel per text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(summaries), len(labels), figsize=(4 * len(labels), 3.4 * len(summaries)),
                             squeeze=False)
    panels = [(vocab, summary, ax, k) for row, (vocab, summary) in zip(axes, summaries.items(), strict=True)
              for ax, k in zip(row, labels, strict=True)]
    for vocab, summary, ax, k in panels:
        for i, (name, budgets) in enumerate(summary.items()):
            xs = [int(b) * (1 + 0.04 * i) for b in budgets]  # side by side, not on top of each other
            ys = [budgets[b][k]["mean"] for b in budgets]
            lo = [budgets[b][k]["mean"] - min(budgets[b][k]["seeds"]) for b in budgets]
            hi = [max(budgets[b][k]["seeds"]) - budgets[b][k]["mean"] for b in budgets]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=name)
        ax.set_xscale("log")
        ticks = [int(b) for b in next(iter(summary.values()))]
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{k}, vocabulary {int(vocab):,}")
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
    p.add_argument("--vocab-sizes", type=numbers, default=[64000, 8192],
                   help="vocabulary sizes, comma-separated: a row group each (default 64000,8192)")
    p.add_argument("--max-chars", type=int, default=3_000_000, help="characters read from each file")
    p.add_argument("--heldout-chars", type=int, default=200_000, help="held-out characters per language")
    p.add_argument("--budgets", type=numbers, default=[250000, 750000], help="training tokens, comma-separated")
    p.add_argument("--seeds", type=numbers, default=[1, 2, 3], help="comma-separated")
    args = p.parse_args()
    vocabs = list(dict.fromkeys(args.vocab_sizes))
    budgets = sorted(set(args.budgets))
    seeds = args.seeds
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    texts = write_heldout(args.data, args.out, args.max_chars, args.heldout_chars)
    labels = [x for mean, parts in MEANS.items() for x in (*parts, mean)]
    tokenizers, cpt = {}, {}
    for v in vocabs:  # every shard set first: commands for other seeds may then run beside this one
        work = args.out / f"vocab-{v}"
        tokenizers[v] = train_tokenizers(args.data, work, v, args.max_chars)
        cpt[str(v)] = {name: chars_per_token(tok, texts) for name, tok in tokenizers[v].items()}
        for name in TOKENIZERS:
            build_corpus(args.data, tokenizers[v][name], work / name / "corpus", budgets[-1], args.max_chars)
    bits: dict[int, dict[str, dict[int, list[dict[str, float]]]]] = {}
    flops: dict[str, dict[str, dict[str, float]]] = {}
    for v in vocabs:
        for name in TOKENIZERS:
            for budget in budgets:
                for seed in seeds:
                    t = time.time()
                    run = args.out / f"vocab-{v}" / name / f"run-{budget}-seed{seed}"
                    scores = train_and_score(run.parent / "corpus", run, budget // BATCH_TOKENS, seed, texts)
                    bits.setdefault(v, {}).setdefault(name, {}).setdefault(budget, []).append(scores)
                    flops.setdefault(str(v), {}).setdefault(name, {})[str(budget)] = \
                        training_flops(run, budget // BATCH_TOKENS)
                    print(f"vocabulary {v:,}, {name} {budget:,} tokens seed {seed}: "
                          + ", ".join(f"{k} {x:.4f}" for k, x in scores.items()) + f" ({time.time() - t:.0f} s)",
                          file=sys.stderr, flush=True)
    summaries = {str(v): summarise(bits[v]) for v in vocabs}
    md = (f"`tiny` GPT (pretrain preset), {len(seeds)} seeds per cell: held-out bits per byte, mean ± half the "
          "seeds' range (lower is better); `mean` is the mean of bn and en, `tatoeba_mean` of the Tatoeba pair. "
          "The same text in bytes for every tokenizer: each trains its tokenizer and builds its shards from the "
          f"same characters (the first {args.max_chars:,} of each file), and every model is scored on the same "
          "held-out text, whose UTF-8 bytes divide its bits. Equal compute: within a vocabulary every model has "
          "the same shape and trains on the same number of its own tokens, so the same training FLOPs (the run's "
          "FLOPs per token, 6N with the tied output head plus attention, times its tokens); a tokenizer with more "
          "chars/token reads more of the text for them. The head grows with the vocabulary, so compare FLOPs and "
          "bits only within one vocabulary. chars/token: the tokenizer on the same held-out text.\n\n"
          + table(summaries, cpt, flops, labels) + "\n\nDoes the default cost English anything (default vs naive, "
          "held-out en)?\n\n" + "\n".join(f"* {line}" for v, s in summaries.items() for line in english_cost(s, v))
          + "\n" + "".join(f"\nVocabulary {int(v):,}, every text:\n\n" + "\n".join(
              f"* {line}" for pair in (("default", "naive"), ("default", "no-phrase"))
              for line in verdicts(s, labels, *pair)) + "\n" for v, s in summaries.items()))
    atomic_write_text(args.out / "results.md", md)
    write_json(args.out / "results.json", {"arguments": {k: str(x) for k, x in vars(args).items()},
                                            "chars_per_token": cpt, "training_flops": flops,
                                            "bits_per_byte": summaries, "seconds": round(time.time() - started, 1)})
    plot(summaries, labels, args.out / "bits_per_byte.png")
    print(md)

if __name__ == "__main__":
    main()
