"""Held-out figures for trained tokenizers: chars/token per source, the Bangla-English premium on parallel
text, and the share of Bangla tokens that start with a combining mark, ZWJ or ZWNJ.

    python benchmarks/eval_train.py --data ../shared/data OUT1/tokenizer.json [OUT2/tokenizer.json ...]

Held-out text, none of it trained on by ``tokenizers-train`` on the same files: the blocks of every source that
``tokenizers_train.sampling`` holds aside (every 50th block of 20 lines, ``--holdout 0.02``), the XQuAD English
Wikipedia contexts, and the Tatoeba bn-en parallel sentences (premium = Bangla tokens / English tokens on the
same sentences). Characters are counted on the raw text as stored (``য়`` precomposed is one character),
tokens without special tokens. ``mark-start`` is measured on the Bangla blog slice.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from tokenizers import Tokenizer

from corpus.normalize import normalize
from tokenizers_train.graphemes import starts_with_mark
from tokenizers_train.sampling import HOLDOUT_BLOCK

HELD = {"bn blog": "bn/blog-sachalayatan.txt.gz", "bn poems": "bn/poems-pd-banglakosh.txt.gz",
        "bn literature": "bn/literature-bnarchive.txt.gz", "en wiki": "en/wiki-en-chinapedia.txt.gz"}
XQUAD_EN = "multi/xquad/eng_Latn.contexts.txt.gz"
TATOEBA = {"bn": "parallel/tatoeba-bn-en/ben_Beng.txt.gz", "en": "parallel/tatoeba-bn-en/eng_Latn.txt.gz"}
PERIOD = 50  # 1 / the default --holdout


def read(path: Path, held_only: bool) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for i, line in enumerate(f) if not held_only or (i // HOLDOUT_BLOCK) % PERIOD == 0]


def n_tokens(tok: Tokenizer, lines: list[str]) -> list[int]:
    return [len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False)]


def mark_start_share(tok: Tokenizer, lines: list[str]) -> float:
    texts = [normalize(x) for x in lines]
    starts = total = 0
    for text, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False), strict=True):
        total += len(enc.offsets)
        starts += sum(starts_with_mark(text[a:b]) for a, b in enc.offsets)
    return starts / total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="the shared data folder (bn/, en/, multi/, parallel/)")
    p.add_argument("tokenizers", nargs="+", help="tokenizer.json files")
    args = p.parse_args()
    texts = {name: read(args.data / rel, held_only=True) for name, rel in HELD.items()}
    texts["en XQuAD"] = read(args.data / XQUAD_EN, held_only=False)
    parallel = {k: read(args.data / rel, held_only=False) for k, rel in TATOEBA.items()}
    cols = [*texts, "Tatoeba bn/en cpt", "Tatoeba premium", "bn mark-start"]
    print("| tokenizer | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for path in args.tokenizers:
        tok = Tokenizer.from_file(path)
        cells = [f"{sum(map(len, lines)) / sum(n_tokens(tok, lines)):.3f}" for lines in texts.values()]
        bn, en = (sum(n_tokens(tok, parallel[k])) for k in ("bn", "en"))
        cells.append(f"{sum(map(len, parallel['bn'])) / bn:.3f} / {sum(map(len, parallel['en'])) / en:.3f}")
        cells.append(f"{bn / en:.3f}")
        cells.append(f"{mark_start_share(tok, texts['bn blog']):.2%}")
        print(f"| {path} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
