"""The four packages chained as a user chains them, through their command lines, on the shipped sample:
train a tokenizer -> build shards in its tokens -> pretrain a few steps -> evaluate. Each package's own
tests cover it alone; this one catches the seams (a tokenizer the corpus cannot use, a manifest pretrain
refuses, an evaluation that cannot find its text counts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpus.shards.format import Manifest, read_shard
from fertility.tokenizers import load_tokenizer

pytestmark = pytest.mark.slow


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(args[:2])} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_tokenizer_to_shards_to_model(tmp_path: Path, sample_dir: Path) -> None:
    root = sample_dir.parents[1]
    bn = sample_dir / "bn" / "literature-bnarchive.txt.gz"
    en = sample_dir / "en" / "wiki-en-chinapedia.txt.gz"

    tok_dir = tmp_path / "tok"
    _run("tokenizers_train", "--text", f"bn={bn}", "--text", f"en={en}", "--vocab-size", "1024",
         "--max-chars-per-source", "150000", "--shares", "bn=0.6,en=0.4", "--no-progress",
         "--out", str(tok_dir), cwd=root)
    tokenizer_file = tok_dir / "tokenizer.json"
    tok = load_tokenizer(str(tokenizer_file))
    assert tok.vocab_size == 1024 and tok.bos_id is not None

    shards = tmp_path / "shards"
    _run("corpus", "build", "--source", f"bn={bn}", "--source", f"en={en}", "--tokenizer", str(tokenizer_file),
         "--mix", "bn=0.7,en=0.3", "--tokens", "60000", "--val-tokens", "4000", "--max-chars", "150000",
         "--no-progress", "--out", str(shards), cwd=root)
    manifest = Manifest.load(shards)
    assert manifest.tokenizer.sha256 == tok.fingerprint
    train = np.concatenate([np.asarray(read_shard(shards / s.file)) for s in manifest.split("train")])
    assert train.max() < tok.vocab_size
    assert train[0] == tok.bos_id
    bn_share = sum(s.tokens_by_language.get("bn", 0) for s in manifest.split("train")) / train.size
    assert abs(bn_share - 0.7) < 0.01

    run = tmp_path / "run"
    _run("pretrain", "launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--max-steps", "4",
         "--no-supervisor", "--set", "train.preflight_steps=1", "--set", "data.eval_tokens=2048",
         "--set", "train.tensorboard=no", cwd=root)
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert all(np.isfinite(s["loss"]) for s in steps)

    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["tokenizer"]["sha256"] == tok.fingerprint
    for lang in ("bn", "en"):
        model, twin = evaluation["languages"][lang]["model"], evaluation["languages"][lang]["random_init"]
        assert 0 < model["bits_per_char"] < twin["bits_per_char"]
        assert 0 < model["bits_per_byte"] < model["bits_per_char"]
