"""Dump fertility.analyze's results, exact mode and the default, on real text of several scripts, for a
byte-for-byte comparison before and after a change to the analyzer.

    python benchmarks/results/2026-12-03-fertility-exact/golden.py OUT.json [--tokenizer NAME ...]

OUT.json holds, per detail_every (1 and 64) and tokenizer, report.json's tokenizer entry without its timing
(``seconds``), and every Metrics field of every language and script unrounded (JSON writes floats as their
shortest exact repr, so equal files mean equal numbers to the last bit).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from fertility.analysis import analyze
from fertility.text import TextSource

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared"
MAX_CHARS = 150_000
TEXTS = [
    ("bn", ROOT / "data/sample/bn/literature-bnarchive.txt.gz"),
    ("bn", ROOT / "data/sample/bn/poems-pd-banglakosh.txt.gz"),
    ("bn", SHARED / "data/bn/comments-absa-cricket.txt.gz"),
    ("bn", SHARED / "data/bn/prompts-google-tts.txt.gz"),
    ("en", ROOT / "data/sample/en/wiki-en-chinapedia.txt.gz"),
    ("en", SHARED / "data/en/dialogue-sgd.txt.gz"),
    ("hi", SHARED / "data/multi/dakshina-wiki/hin_Deva.txt.gz"),
    ("ta", SHARED / "data/multi/dakshina-wiki/tam_Taml.txt.gz"),
    ("ur", SHARED / "data/multi/dakshina-wiki/urd_Arab.txt.gz"),
    ("ml", SHARED / "data/multi/smc-wiki/mal_Mlym.txt.gz"),
    ("te", SHARED / "data/multi/wikisource-te-classical/tel_Telu.txt.gz"),
    ("th", SHARED / "data/multi/xquad/tha_Thai.contexts.txt.gz"),
    ("zh", SHARED / "data/multi/xquad/zho_Hans.contexts.txt.gz"),
    ("ru", SHARED / "data/multi/xquad/rus_Cyrl.contexts.txt.gz"),
    ("el", SHARED / "data/multi/xquad/ell_Grek.contexts.txt.gz"),
    ("ar", SHARED / "data/multi/xquad/arb_Arab.contexts.txt.gz"),
]
TOKENIZERS = ["gpt2", "o200k_base", "bnlp-bn-spm", "cl100k_base", "qwen2.5", "llama2", "gemma", "mistral-v3",
              "anthropic-claude-legacy", "bangla-bert-base"]


def dump(detail_every: int, tokenizers: list[str]) -> dict:
    sources = [TextSource(lang, str(path)) for lang, path in TEXTS]
    report = analyze(tokenizers, sources, max_chars=MAX_CHARS, tokenizer_dir=SHARED / "tokenizers",
                     progress=False, detail_every=detail_every)
    out = {"texts": report.texts, "samples": report.samples, "tokenizers": {}}
    for t in report.tokenizers:
        entry = t.to_dict()
        del entry["seconds"]
        entry["raw"] = {group: {k: dataclasses.asdict(m) for k, m in metrics.items()}
                        for group, metrics in (("languages", t.languages), ("scripts", t.scripts))}
        out["tokenizers"][t.name] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--tokenizer", action="append", default=None)
    args = parser.parse_args()
    names = args.tokenizer or TOKENIZERS
    result = {f"detail_every={k}": dump(k, names) for k in (1, 64)}
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, sort_keys=True, indent=0) + "\n")


if __name__ == "__main__":
    main()
