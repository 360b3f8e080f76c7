"""The harness's ``custom_dataset`` for ``bangla_sample_cloze``: the JSONL beside this file, offline."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).with_name("bangla_sample_cloze.jsonl")


def load(**_metadata):
    """``{"test": Dataset}`` of the shipped items (the harness passes its metadata; none is used)."""
    import datasets

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return {"test": datasets.Dataset.from_list(rows)}
