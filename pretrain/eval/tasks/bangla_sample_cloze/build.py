"""Builds ``bangla_sample_cloze.jsonl`` from the shipped Tatoeba sentences (``data/sample/parallel``).

    python -m pretrain.eval.tasks.bangla_sample_cloze.build   (from the repository root)

Each item is a Bangla sentence of at least 6 words cut after its first half of words; the choices are its
own second half and the second halves of three other items' sentences, the true one at position
``item % 4`` so that no position is favoured. Deterministic: the same file every time
(``tests/pretrain/eval/test_harness.py`` checks the shipped file against this builder).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
SOURCE = ROOT / "data" / "sample" / "parallel" / "ben_Beng.txt.gz"
OUT = Path(__file__).with_name("bangla_sample_cloze.jsonl")
ITEMS, CHOICES, MIN_WORDS, SEED = 40, 4, 6, 15


def build_items(source: Path = SOURCE) -> list[dict]:
    """The task's items: ``{"id", "context", "choices", "label", "line"}`` (``line``: 1-based in the source)."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    picked, seen = [], set()
    for number, line in enumerate(lines, 1):
        words = line.split()
        if len(words) >= MIN_WORDS and line not in seen:
            seen.add(line)
            picked.append((number, words))
    step = len(picked) // ITEMS  # spread over the file rather than its first stretch of one topic
    picked = picked[::step][:ITEMS]
    halves = [(" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2:])) for _, w in picked]
    rng = random.Random(SEED)
    items = []
    for i, ((number, _), (context, ending)) in enumerate(zip(picked, halves, strict=True)):
        others = rng.sample([e for j, (_, e) in enumerate(halves) if j != i and e != ending], CHOICES - 1)
        label = i % CHOICES
        items.append({"id": i, "context": context, "choices": others[:label] + [ending] + others[label:],
                      "label": label, "line": number})
    return items


def render(items: list[dict]) -> str:
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)


if __name__ == "__main__":
    OUT.write_text(render(build_items()), encoding="utf-8")
    print(f"wrote {OUT}")
