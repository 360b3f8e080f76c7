"""The analysis: stream labelled text through every tokenizer once and collect a :class:`Report`.

Each batch of documents is laid out once (scripts, clusters, words) and then tokenized by every tokenizer,
so adding a tokenizer costs its encoding and attribution, not another pass over the text's scripts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from fertility.balance import Balance, balance
from fertility.errors import InputError
from fertility.graphemes import REGEX_VERSION, UNICODE_VERSION
from fertility.metrics import Counts, Metrics, count_tokens, prepare_batch
from fertility.premium import ParallelMetrics, premium, read_parallel
from fertility.scripts import SCRIPT_NAMES
from fertility.text import TextError, TextSource, check_source, iter_documents
from fertility.tokenizers import Tokenizer, load_tokenizer
from fertility.traps import Trap, find_traps

SCHEMA_VERSION = 1
BATCH_CHARS = 200_000
BATCH_DOCS = 4096


@dataclass
class TokenizerReport:
    """Everything measured for one tokenizer."""

    name: str
    kind: str
    path: str
    fingerprint: str
    vocab_size: int
    languages: dict[str, Metrics]
    scripts: dict[str, Metrics]
    parallel: dict[str, ParallelMetrics]
    traps: list[Trap]
    balance: Balance
    seconds: float

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "fingerprint": self.fingerprint,
            "vocab_size": self.vocab_size,
            "seconds": round(self.seconds, 3),
            "languages": {k: m.to_dict() for k, m in self.languages.items()},
            "scripts": {k: m.to_dict() for k, m in self.scripts.items()},
            "parallel": {k: p.to_dict() for k, p in self.parallel.items()},
            "balance": self.balance.to_dict(),
            "traps": [t.to_dict() for t in self.traps],
        }


@dataclass
class Report:
    """The analysis of some tokenizers on some labelled text; ``to_dict`` is report.json."""

    tokenizers: list[TokenizerReport]
    texts: list[dict]
    parallel_texts: dict[str, str] = field(default_factory=dict)
    reference: str = "en"
    max_chars: int | None = None

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "settings": {"reference": self.reference, "max_chars": self.max_chars,
                         "unicode_version": UNICODE_VERSION, "regex_version": REGEX_VERSION},
            "texts": self.texts,
            "parallel_texts": self.parallel_texts,
            "tokenizers": [t.to_dict() for t in self.tokenizers],
        }

    def tokenizer(self, name: str) -> TokenizerReport:
        """The report of the tokenizer called ``name``."""
        for t in self.tokenizers:
            if t.name == name:
                return t
        raise KeyError(f"no tokenizer {name!r} in this report ({', '.join(t.name for t in self.tokenizers)})")


def analyze(
    tokenizers: Sequence[str | Tokenizer],
    texts: Sequence[TextSource] | Mapping[str, Sequence[str]],
    *,
    parallel: Mapping[str, str | TextSource] | None = None,
    reference: str = "en",
    max_chars: int | None = None,
    tokenizer_dir: str | Path | None = None,
    progress: bool = True,
    errors: str = "strict",
) -> Report:
    """Measure ``tokenizers`` (names, paths or loaded) on ``texts`` (sources, or raw strings per language).

    ``max_chars`` samples the first whole documents of each text source up to that many characters (and the
    same first sentences of every parallel file). ``parallel`` maps languages to line-aligned files; premiums
    are against ``reference``. ``errors="skip"`` skips lines of text sources that are not UTF-8 (counted in
    ``texts[i]["bad_utf8"]``). Every input is checked before the work starts: all tokenizers are loaded, every
    text source is opened up to its first document, and the parallel files are read and aligned.
    """
    toks = [load_tokenizer(t, tokenizer_dir) for t in tokenizers]
    names = [t.name for t in toks]
    if len(set(names)) != len(names):
        raise InputError(f"two tokenizers share a name: {names}; give each tokenizer once")
    if not isinstance(texts, Mapping):
        for source in texts:
            check_source(source, errors=errors)
    parallel_text = read_parallel(parallel, max_chars) if parallel else None
    per_lang: list[dict[str, Counts]] = [{} for _ in toks]
    seconds = [0.0] * len(toks)
    seen: list[tuple[str, str, dict]] = []
    for lang, label, batches, info in _sources(texts, max_chars, progress, errors):
        for docs in batches:
            batch = prepare_batch(docs)
            for i, tok in enumerate(toks):
                start = time.perf_counter()
                counts = count_tokens(tok, batch)
                per_lang[i].setdefault(lang, Counts(tok.vocab_size)).add(counts)
                seconds[i] += time.perf_counter() - start
        seen.append((lang, label, info))  # info is complete once the source is exhausted
    text_info = [{"lang": lang, "source": label, **info} for lang, label, info in seen]

    reports = []
    for i, tok in enumerate(toks):
        languages = {lang: c.total_metrics() for lang, c in per_lang[i].items()}
        all_text = Counts(tok.vocab_size)
        for c in per_lang[i].values():
            all_text.add(c)
        scripts = {SCRIPT_NAMES[s]: all_text.script_metrics(s) for s in all_text.scripts()}
        start = time.perf_counter()
        par = premium(tok, parallel_text, reference) if parallel_text else {}
        seconds[i] += time.perf_counter() - start
        reports.append(TokenizerReport(tok.name, tok.kind, tok.path, tok.fingerprint, tok.vocab_size, languages,
                                       scripts, par, find_traps(scripts), balance(languages), seconds[i]))
    return Report(reports, text_info, dict(parallel_text.sources) if parallel_text else {}, reference, max_chars)


def _sources(texts, max_chars: int | None, progress: bool, errors: str) -> Iterator[tuple[str, str, Iterator[list[str]], dict]]:
    """(language, label, batches of documents, info dict filled in as the batches are consumed)."""
    if isinstance(texts, Mapping):
        for lang, docs in texts.items():
            if isinstance(docs, str):
                raise TypeError(f"texts[{lang!r}] must be a sequence of documents, not one string")
            kept = _head([d for d in docs if d.strip()], max_chars)
            if not kept:
                raise TextError(f"texts[{lang!r}]: no documents (expected non-blank strings)")
            info = {"documents": len(kept), "chars": sum(map(len, kept)), "bad_utf8": 0}
            yield lang, "<memory>", _chunks(iter(kept)), info
        return
    for source in texts:
        counters: dict = {}
        info: dict = {}
        bar = tqdm(total=max_chars, unit="char", unit_scale=True, desc=f"{source.lang}: {Path(source.spec).name}",
                   disable=not progress, leave=False)
        docs = (d.text for d in iter_documents(source, max_chars=max_chars, errors=errors,
                                                          counters=counters))
        yield source.lang, source.spec, _chunks(docs, bar), info
        bar.close()
        info.update(field=source.field, documents=counters.get("documents", 0), chars=counters.get("chars", 0),
                    bad_utf8=counters.get("bad_utf8", 0))


def _head(docs: list[str], max_chars: int | None) -> list[str]:
    if max_chars is None:
        return docs
    kept, total = [], 0
    for d in docs:
        if total >= max_chars:
            break
        kept.append(d)
        total += len(d)
    return kept


def _chunks(docs: Iterator[str], bar=None) -> Iterator[list[str]]:
    batch: list[str] = []
    chars = 0
    for d in docs:
        batch.append(d)
        chars += len(d)
        if chars >= BATCH_CHARS or len(batch) >= BATCH_DOCS:
            yield batch
            if bar is not None:
                bar.update(chars)
            batch, chars = [], 0
    if batch:
        yield batch
        if bar is not None:
            bar.update(chars)
