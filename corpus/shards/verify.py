"""Check a shard directory against its manifest, and recount its languages from the tokens alone.

``verify_shards`` reads every shard: header, size, dtype, token count, BOS-delimited document count and
content hash. ``recount_languages`` decodes every document and assigns it to the manifest language whose
script dominates it, so per-language token shares can be checked without trusting the manifest.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from common.fileio import file_sha256
from corpus.quality.clean import script_of, script_share
from corpus.quality.filters import CleanConfig, clean_document
from corpus.shards.format import Manifest, ShardError, ShardInfo, read_header, read_shard
from fertility.text import TextSource, iter_documents
from fertility.tokenizers import Tokenizer


@dataclass
class Verification:
    """Problems found, per shard file; empty when the directory matches its manifest."""

    shards: int = 0
    tokens: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_written(directory: str | Path, shards: list[ShardInfo], dtype: str) -> None:
    """Stage 5 of a build, after the writing: the header of every shard it wrote says the dtype and token count
    its record does (a mismatch is a bug, not bad input)."""
    for s in shards:
        dtype_found, count = read_header(Path(directory) / s.file)
        if dtype_found != dtype or count != s.tokens:
            raise RuntimeError(f"{Path(directory) / s.file}: wrote {count} {dtype_found} tokens, expected {s.tokens} {dtype}")


def documents(tokens: np.ndarray, bos_id: int) -> Iterator[np.ndarray]:
    """The documents of a shard: each starts at a BOS and runs to the next one (BOS excluded)."""
    starts = np.flatnonzero(tokens == bos_id)
    ends = np.append(starts[1:], tokens.size)
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        yield tokens[a + 1:b]


def verify_shards(directory: str | Path, manifest: Manifest, *, hashes: bool = True, progress: bool = True) -> Verification:
    """Check every shard of ``manifest`` in ``directory``; collect problems rather than stop at the first."""
    directory = Path(directory)
    result = Verification()
    for s in tqdm(manifest.shards, desc="verify", unit="shard", disable=not progress, dynamic_ncols=True):
        result.shards += 1
        try:
            dtype, count = read_header(directory / s.file)
        except ShardError as e:
            result.problems.append(str(e))
            continue
        result.tokens += count
        if dtype != manifest.dtype:
            result.problems.append(f"{s.file}: dtype {dtype}, manifest says {manifest.dtype}")
        if count != s.tokens:
            result.problems.append(f"{s.file}: {count} tokens, manifest says {s.tokens}")
        if sum(s.tokens_by_language.values()) != s.tokens:
            result.problems.append(f"{s.file}: per-language tokens sum to {sum(s.tokens_by_language.values())}, "
                                   f"not {s.tokens}")
        tokens = read_shard(directory / s.file)
        if count and int(tokens[0]) != manifest.tokenizer.bos_id:
            result.problems.append(f"{s.file}: first token {int(tokens[0])} is not BOS {manifest.tokenizer.bos_id}")
        n_docs = int(np.count_nonzero(tokens == manifest.tokenizer.bos_id))
        if n_docs != s.documents:
            result.problems.append(f"{s.file}: {n_docs} BOS-delimited documents, manifest says {s.documents}")
        if hashes and s.sha256 and file_sha256(directory / s.file) != s.sha256:
            result.problems.append(f"{s.file}: content hash differs from the manifest's (file changed after the build)")
    return result


def classify(text: str, scripts: dict[str, str]) -> str | None:
    """The language (key of ``scripts``) whose script has the largest share of ``text``'s letters."""
    best, best_share = None, 0.0
    for language, script in scripts.items():
        share = script_share(text, script)
        if share > best_share:
            best, best_share = language, share
    return best


def recount_languages(directory: str | Path, shards: list[ShardInfo], tokenizer: Tokenizer, bos_id: int,
                      languages: list[str], *, progress: bool = True) -> dict[str, int]:
    """Tokens per language (BOS included) over ``shards``, from the decoded text of each document.

    Languages written in the same script cannot be told apart this way; documents whose script matches no
    language are counted under ``"?"``.
    """
    scripts = {lang: script_of(lang) for lang in languages}
    if None in scripts.values() or len(set(scripts.values())) < len(scripts):
        raise ValueError(f"cannot tell {', '.join(languages)} apart by script ({scripts})")
    counts: dict[str, int] = {}
    total = sum(s.tokens for s in shards)
    bar = tqdm(total=total, desc="recount", unit="tok", unit_scale=True, disable=not progress, dynamic_ncols=True)
    for s in shards:
        for doc in documents(read_shard(Path(directory) / s.file), bos_id):
            language = classify(tokenizer.decode(doc.tolist()), scripts) or "?"
            counts[language] = counts.get(language, 0) + doc.size + 1
            bar.update(doc.size + 1)
    bar.close()
    return dict(sorted(counts.items()))


def format_summary(directory: str | Path, manifest: Manifest) -> str:
    """The manifest in a few lines: tokenizer, splits, per-language tokens and shares."""
    tok = manifest.tokenizer
    lines = [f"{directory}: {len(manifest.shards)} shards, dtype {manifest.dtype}, seed {manifest.seed}",
             f"tokenizer {tok.spec} (sha256 {tok.sha256[:16]}…, vocab {tok.vocab_size:,}, BOS {tok.bos_id})"]
    train = manifest.split("train")
    by_lang: dict[str, int] = {}
    for s in train:
        for lang, n in s.tokens_by_language.items():
            by_lang[lang] = by_lang.get(lang, 0) + n
    total = sum(by_lang.values())
    lines.append(f"train: {len(train)} shards, {sum(s.documents for s in train):,} documents, {total:,} tokens: "
                 + ", ".join(f"{lang} {n:,} ({n / total:.2%})" for lang, n in by_lang.items()))
    for lang in sorted({s.language for s in manifest.split("val") if s.language}):
        val = manifest.split("val", language=lang)
        lines.append(f"val {lang}: {len(val)} shards, {sum(s.documents for s in val):,} documents, "
                     f"{sum(s.tokens for s in val):,} tokens, {sum(s.chars for s in val):,} chars, "
                     f"{sum(s.bytes for s in val):,} bytes")
    return "\n".join(lines)


def check_decoded_text(directory: str | Path, manifest: Manifest, tokenizer: Tokenizer, samples: int, seed: int = 0,
                       *, progress: bool = True) -> tuple[int, list[str]]:
    """Decode ``samples`` random training documents and check each is a cleaned document of the sources.

    The sources are read again from the manifest's specs and cleaned with its recorded settings, so this
    checks tokenizer round trip, cleaning and packing together. Returns (documents checked, problems).
    """
    rng = np.random.default_rng(seed)
    train = manifest.split("train")
    picked: list[tuple[str, str]] = []
    for s in rng.integers(len(train), size=samples if train else 0).tolist():
        docs = list(documents(read_shard(Path(directory) / train[s].file), manifest.tokenizer.bos_id))
        doc = docs[int(rng.integers(len(docs)))]
        picked.append((train[s].file, tokenizer.decode(doc.tolist())))
    wanted = {hashlib.blake2b(text.encode(), digest_size=16).digest() for _, text in picked}
    found: set[bytes] = set()
    clean = CleanConfig(**manifest.filters.get("clean", {}))
    max_chars = manifest.arguments.get("ingest", {}).get("max_chars")
    errors = "skip" if manifest.filters.get("bad_utf8") == "skip" else "strict"
    counters: Counter = Counter()
    for record in manifest.sources:
        source = TextSource(record["language"], record["spec"], record.get("field", "text"), record.get("config"),
                            record.get("split", "train"))
        for doc in tqdm(iter_documents(source, max_chars=max_chars, errors=errors), desc=f"re-clean {source.spec}",
                        unit="doc", disable=not progress, dynamic_ncols=True):
            text = clean_document(doc.text, source.lang, clean, counters)
            if text is not None:
                key = hashlib.blake2b(text.encode(), digest_size=16).digest()
                if key in wanted:
                    found.add(key)
    problems = [f"{file}: decoded document {text[:60]!r}... is not a cleaned source document"
                for file, text in picked if hashlib.blake2b(text.encode(), digest_size=16).digest() not in found]
    return len(picked), problems
