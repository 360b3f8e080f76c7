"""Small real shard sets from the sample text this repository ships, written in the `corpus.shards.format` layout
without `corpus build` (whose dedup needs datasketch): for the tests and for the GPU check's training smoke,
which runs where neither `datasets` nor `datasketch` is installed.

Each language's head of text is normalised, tokenized (a BOS before every document) and split into one mixed
train shard and one val shard per language, the val text after the train text so they do not overlap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from common.fileio import file_sha256
from corpus.read.normalize import normalize
from corpus.shards.format import Manifest, ShardInfo, TokenizerInfo, dtype_for_vocab, write_shard
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "sample"
# The GPU check's smoke text: Bangla literature and English Wikipedia from data/sample.
SAMPLE_SOURCES = {"bn": [SAMPLE_DIR / "bn" / "literature-bnarchive.txt.gz"],
                  "en": [SAMPLE_DIR / "en" / "wiki-en-chinapedia.txt.gz"]}


def write_shard_set(out: Path, sources: dict[str, list[Path]], *, train_chars: int, val_chars: int,
                    tokenizer: str = "gpt2") -> Path:
    """Tokenize the head of each language's sources into one mixed train shard and one val shard per
    language (the val text comes after the train text, so they do not overlap)."""
    tok = load_tokenizer(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    dtype = dtype_for_vocab(tok.vocab_size)
    train_ids: list[np.ndarray] = []
    by_lang: dict[str, int] = {}
    train_docs = 0
    shards: list[ShardInfo] = []
    for lang, paths in sources.items():
        budget = (train_chars + val_chars) // len(paths)
        docs = [normalize(d.text) for p in paths for d in iter_documents(str(p), max_chars=budget)]
        cut, seen = 0, 0
        while cut < len(docs) and seen < train_chars:
            seen += len(docs[cut])
            cut += 1
        for split, part in (("train", docs[:cut]), ("val", docs[cut:])):
            ids = np.concatenate([np.array([tok.bos_id, *d], dtype=np.int64) for d in tok.encode_ids(part)])
            if split == "train":
                train_ids.append(ids)
                by_lang[lang] = len(ids)
                train_docs += len(part)
                continue
            name = f"val_{lang}.bin"
            write_shard(out / name, ids, dtype)
            shards.append(ShardInfo(file=name, split="val", tokens=len(ids), documents=len(part),
                                    tokens_by_language={lang: len(ids)}, language=lang,
                                    chars=sum(len(d) for d in part), bytes=sum(len(d.encode()) for d in part),
                                    sha256=file_sha256(out / name)))
    train = np.concatenate(train_ids)
    write_shard(out / "train_000.bin", train, dtype)
    shards.insert(0, ShardInfo(file="train_000.bin", split="train", tokens=len(train), documents=train_docs,
                               tokens_by_language=by_lang, sha256=file_sha256(out / "train_000.bin")))
    Manifest(tokenizer=TokenizerInfo(spec=tokenizer, sha256=tok.fingerprint, vocab_size=tok.vocab_size,
                                     bos_id=tok.bos_id, eos_id=tok.eos_id),
             dtype=dtype, shards=shards).save(out)
    return out
