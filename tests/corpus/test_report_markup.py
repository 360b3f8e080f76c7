"""The build report says how many lines that were only markup or punctuation the cleaning dropped."""

from __future__ import annotations

import gzip
import json

from corpus.cli import main
from corpus.shards.format import Manifest, read_shard
from corpus.shards.verify import documents
from fertility.tokenizers import load_tokenizer


def test_report_counts_markup_lines_dropped(sample_dir, tmp_path):
    with gzip.open(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", "rt", encoding="utf-8") as f:
        poems = [next(f).rstrip("\n") for _ in range(30)]
    # every document: a code fence, its text in two paragraphs around a "* * *" rule, a closing fence; and a
    # last line that ends in a danda, which stays
    docs = [f"```\n{p[:len(p) // 2]}\n\n* * *\n\n{p[len(p) // 2:]}\nশেষ।\n```" for p in poems]
    path = tmp_path / "bn.jsonl"
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["build", "--source", f"bn={path}", "--tokenizer", "gpt2", "--tokens", "2e4", "--mix", "bn=1",
                 "--val-tokens", "2000", "--no-progress", "--workers", "1", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["markup_lines_dropped"] == 3 * len(docs)
    assert report["sources"][0]["counters"]["markup_lines_dropped"] == 3 * len(docs)
    assert "Markup/punctuation-only lines dropped inside documents (`markup_lines_dropped`): 90." in (
        (out / "report.md").read_text())
    manifest = Manifest.load(out)
    assert manifest.sources[0]["counters"]["markup_lines_dropped"] == 90
    tok = load_tokenizer("gpt2")
    texts = [tok.decode(d.tolist()) for s in manifest.shards
             for d in documents(read_shard(out / s.file), manifest.tokenizer.bos_id)]
    assert texts and all("```" not in t and "* * *" not in t and t.endswith("শেষ।") for t in texts)
