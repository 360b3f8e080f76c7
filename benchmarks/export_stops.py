"""Does an export stop generating by itself? The share of prompts whose generation ends with the model's end token
(the document-boundary token, BOS: docs/pretrain.md, Export) within ``--max-new-tokens`` (and the model's
context), greedy and sampled.

    python benchmarks/export_stops.py DEMO_OUT/hf [--max-new-tokens 200] [--per-language 10]

The prompts are the first 80 characters of the last documents of the first 200,000 characters of each shipped
sample source (data/sample: Bangla literature and poems, English Wikipedia), cleaned as the corpus build cleans
them. Loads the folder with ``AutoTokenizer`` and ``AutoModelForCausalLM``, as a user would.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from corpus.read.normalize import normalize
from fertility.text import iter_documents

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"bn": ["bn/literature-bnarchive.txt.gz", "bn/poems-pd-banglakosh.txt.gz"],
           "en": ["en/wiki-en-chinapedia.txt.gz"]}
PROMPT_CHARS = 80


def prompts(per_language: int) -> list[tuple[str, str]]:
    out = []
    for lang, files in SOURCES.items():
        per = per_language // len(files)
        for name in files:
            docs = [normalize(d.text) for d in iter_documents(str(ROOT / "data" / "sample" / name), max_chars=200_000)]
            out += [(lang, d[:PROMPT_CHARS]) for d in [d for d in docs if len(d) > 100][-per:]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", help="a folder written by `pretrain export`")
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--per-language", type=int, default=10)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.export)
    model = AutoModelForCausalLM.from_pretrained(a.export).eval()
    asked = prompts(a.per_language)
    print(f"{a.export}: end token {tok.eos_token!r} (id {tok.eos_token_id}), {len(asked)} prompts, "
          f"at most {a.max_new_tokens} new tokens within the {tok.model_max_length}-token context")
    for mode, options in (("greedy", {"do_sample": False}), ("sampled", {"do_sample": True, "top_k": 50})):
        torch.manual_seed(0)
        stopped: dict[str, int] = {lang: 0 for lang in SOURCES}
        lengths = []
        for lang, text in asked:
            batch = tok([text], return_tensors="pt")
            room = tok.model_max_length - batch["input_ids"].shape[1]  # within the context the model was trained on
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=min(a.max_new_tokens, room), pad_token_id=tok.pad_token_id,
                                     **options)
            new = out[0, batch["input_ids"].shape[1]:].tolist()
            if tok.eos_token_id in new:
                stopped[lang] += 1
                lengths.append(new.index(tok.eos_token_id) + 1)
        by_lang = ", ".join(f"{lang} {n}/{sum(1 for x, _ in asked if x == lang)}" for lang, n in stopped.items())
        print(f"{mode}: {sum(stopped.values())}/{len(asked)} stopped by the end token ({by_lang}); "
              f"new tokens until the stop: {sorted(lengths)}")


if __name__ == "__main__":
    main()
