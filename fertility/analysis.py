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

from common.errors import InputError
from fertility.graphemes import REGEX_VERSION, UNICODE_VERSION
from fertility.premium import Fairness, ParallelError, ParallelMetrics, fairness, premium, read_parallel
from fertility.scoring.balance import Balance, balance
from fertility.scoring.metrics import COUNT_FIELDS, Counts, Metrics, count_tokens, prepare_batch
from fertility.scoring.sampling import BLOCK_CHARS, BlockStats, intervals, scaled
from fertility.scoring.traps import Trap, find_traps
from fertility.scripts import SCRIPT_NAMES
from fertility.segments import TokenSegment, token_segments
from fertility.text import TextError, TextSource, check_distinct, check_source, cut_head, iter_documents
from fertility.tokenizers import Tokenizer, check_distinct_names, load_tokenizer
from fertility.totals import Totals

SCHEMA_VERSION = 1
BATCH_CHARS = 200_000
BATCH_DOCS = 4096
SAMPLE_SENTENCES = 3
SAMPLE_CHARS = 120
MIN_SAMPLE_LETTERS = 12
# The source a report names for text given as strings, not files (``analyze(source_label=...)`` says more).
MEMORY_SOURCE = "text given as strings"


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
    samples: dict[str, list[list[TokenSegment]]] = field(default_factory=dict)  # the viewer's sentences' tokens
    reference: str = "en"  # the parallel text's reference language (the premiums' denominator)

    def fairness(self) -> Fairness | None:
        """Premiums against the reference, their maximum and the Gini coefficient (None without parallel)."""
        return fairness(self.parallel, self.reference)

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
            "fairness": f.to_dict() if (f := self.fairness()) else None,
            "balance": self.balance.to_dict(),
            "traps": [t.to_dict() for t in self.traps],
            "sample_tokens": {lang: [[[t.token_id, t.byte_start, t.byte_end, t.cuts_cluster] for t in sentence]
                                     for sentence in sentences] for lang, sentences in self.samples.items()},
        }


@dataclass
class Report:
    """The analysis of some tokenizers on some labelled text; ``to_dict`` is report.json."""

    tokenizers: list[TokenizerReport]
    texts: list[dict]
    parallel_texts: dict[str, str] = field(default_factory=dict)
    reference: str = "en"
    max_chars: int | None = None
    detail_every: int = 1
    samples: dict[str, list[str]] = field(default_factory=dict)  # a few sentences per language (the viewer)

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "settings": {"reference": self.reference, "max_chars": self.max_chars, "detail_every": self.detail_every,
                         "unicode_version": UNICODE_VERSION, "regex_version": REGEX_VERSION},
            "texts": self.texts,
            "parallel_texts": self.parallel_texts,
            "samples": self.samples,
            "tokenizers": [t.to_dict() for t in self.tokenizers],
            # the summary's fairness table: per tokenizer, premiums, max premium and Gini (parallel text only)
            "summary": {"fairness": {t.name: f.to_dict() for t in self.tokenizers if (f := t.fairness())}},
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
    detail_every: int = 1,
    source_label: str = MEMORY_SOURCE,
) -> Report:
    """Measure ``tokenizers`` (names, paths or loaded) on ``texts`` (sources, or raw strings per language).

    ``max_chars`` samples the first whole documents of each text source up to that many characters (and the
    same first sentences of every parallel file). ``parallel`` maps languages to line-aligned files; premiums
    are against ``reference``. ``errors="skip"`` skips lines of text sources that are not UTF-8 (counted in
    ``texts[i]["bad_utf8"]``). Every input is checked before the work starts: all tokenizers are loaded, every
    text source is opened up to its first document, and the parallel files are read and aligned.
    ``detail_every=k`` analyses one block of text in ``k`` in detail and the rest for its totals only
    (:mod:`fertility.scoring.sampling`); 1 (the default) analyses everything. ``source_label`` names raw
    strings as the report's source of each language's text (e.g. "held-out slice of the training text").
    """
    toks = [load_tokenizer(t, tokenizer_dir) for t in tokenizers]
    check_distinct_names([t.name for t in toks])
    if not isinstance(texts, Mapping):
        for source in texts:
            check_source(source, errors=errors)
        check_distinct(texts)
    parallel_text = read_parallel(parallel, max_chars) if parallel else None
    if parallel_text and reference not in parallel_text.sentences:
        raise ParallelError(f"reference language {reference!r} is not among the parallel files "
                            f"({', '.join(parallel_text.sentences)}); pass --parallel {reference}=PATH or --reference")
    if detail_every < 1:
        raise InputError(f"detail_every={detail_every}: expected 1 (everything in detail) or more")
    per_lang: list[dict[str, Counts]] = [{} for _ in toks]
    stats: list[dict[str, BlockStats]] = [{} for _ in toks]
    tokens: list[dict[str, int]] = [{} for _ in toks]
    totals: dict[str, Totals] = {}
    blocks: dict[str, list[int]] = {}  # language -> [block index, characters in that block so far]
    seconds = [0.0] * len(toks)
    samples: dict[str, list[str]] = {}
    seen: list[tuple[str, str, dict]] = []
    for lang, label, batches, info in _sources(texts, max_chars, progress, errors, source_label):
        total = totals.setdefault(lang, Totals())
        for docs in batches:
            _add_samples(samples.setdefault(lang, []), docs)
            total.documents += len(docs)
            total.chars += sum(map(len, docs))
            if detail_every == 1:
                units = [(0, docs)]
            else:
                units = _sampled_blocks(docs, blocks.setdefault(lang, [0, 0]), detail_every)
            prepared = [(block, prepare_batch(u)) for block, u in units]
            # a batch laid out whole has its bytes counted already
            total.bytes += (int(prepared[0][1].scripted.char_to_byte[-1]) if detail_every == 1
                            else sum(len(d.encode("utf-8")) for d in docs))
            for i, tok in enumerate(toks):
                start = time.perf_counter()
                if detail_every > 1:  # the exact token count of every document: the encoder's own call
                    tokens[i][lang] = tokens[i].get(lang, 0) + sum(map(len, tok.encode_ids(docs)))
                lang_counts = per_lang[i].setdefault(lang, Counts(tok.vocab_size))
                for block, batch in prepared:
                    counts = count_tokens(tok, batch)
                    lang_counts.add(counts)
                    if detail_every > 1:
                        stats[i].setdefault(lang, BlockStats()).add_block(counts, block)
                seconds[i] += time.perf_counter() - start
        seen.append((lang, label, info))  # info is complete once the source is exhausted
    text_info = [{"lang": lang, "source": label, **info} for lang, label, info in seen]

    reports = []
    for i, tok in enumerate(toks):
        if detail_every == 1:  # everything was analysed: the detail's token count is the total
            tokens[i] = {lang: c.token_total for lang, c in per_lang[i].items()}
        languages, scripts = _metrics(per_lang[i], stats[i], totals, tokens[i], tok.vocab_size)
        start = time.perf_counter()
        par = premium(tok, parallel_text, reference) if parallel_text else {}
        seconds[i] += time.perf_counter() - start
        viewer = {lang: [token_segments(tok, text) for text in texts] for lang, texts in samples.items()}
        reports.append(TokenizerReport(tok.name, tok.kind, tok.path, tok.fingerprint, tok.vocab_size, languages,
                                       scripts, par, find_traps(scripts), balance(languages), seconds[i], viewer,
                                       reference))
    return Report(reports, text_info, dict(parallel_text.sources) if parallel_text else {}, reference, max_chars,
                  detail_every, samples)


def _add_samples(kept: list[str], docs: list[str]) -> None:
    """Keep the first ``SAMPLE_SENTENCES`` documents of a language with some words in them, each cut to about
    ``SAMPLE_CHARS`` characters after a space, for the token viewer."""
    for doc in docs:
        if len(kept) >= SAMPLE_SENTENCES:
            return
        text = doc.strip()
        if sum(ch.isalpha() for ch in text[:SAMPLE_CHARS]) < MIN_SAMPLE_LETTERS:  # a rule, a heading number
            continue
        if len(text) > SAMPLE_CHARS:
            cut = text.rfind(" ", 0, SAMPLE_CHARS)
            text = text[: cut if cut > SAMPLE_CHARS // 2 else SAMPLE_CHARS]
        kept.append(text)


def _sampled_blocks(docs: list[str], state: list[int], every: int) -> list[tuple[int, list[str]]]:
    """The documents of ``docs`` that fall in sampled blocks: (block index, documents) per block (see
    fertility.scoring.sampling). A block that straddles two batches comes in two parts with the same index.

    ``state`` is the language's [block index, characters in the current block], carried across batches.
    """
    units: list[tuple[int, list[str]]] = []
    for d in docs:
        if state[0] % every == 0:
            if not units or units[-1][0] != state[0]:
                units.append((state[0], []))
            units[-1][1].append(d)
        state[1] += len(d)
        if state[1] >= BLOCK_CHARS:
            state[0] += 1
            state[1] = 0
    return units


def _metrics(per_lang: dict[str, Counts], stats: dict[str, BlockStats], totals: dict[str, Totals],
             tokens: dict[str, int], vocab_size: int) -> tuple[dict[str, Metrics], dict[str, Metrics]]:
    """Per-language and per-script metrics, scaled to the exact totals where only a sample was analysed."""
    languages: dict[str, Metrics] = {}
    script_parts: dict[int, list[Metrics]] = {}
    all_sample = Counts(vocab_size)
    merged = BlockStats()
    sampled_chars = all_chars = 0
    for lang, c in per_lang.items():
        t = totals[lang]
        exact = Totals(t.documents, t.chars, t.bytes, tokens[lang])
        sample = c.total_metrics()
        share = sample.chars / t.chars if t.chars else 1.0
        m = scaled(sample, exact, sample)
        if lang in stats:
            m.sample_share = share
            m.ci95 = intervals(stats[lang], -1, share, exact=("chars_per_token", "bytes_per_token"))
            merged.merge(stats[lang])
        languages[lang] = m
        for sid in c.scripts():
            script_parts.setdefault(sid, []).append(scaled(c.script_metrics(sid), exact, sample))
        all_sample.add(c)
        sampled_chars += sample.chars
        all_chars += t.chars
    share = sampled_chars / all_chars if all_chars else 1.0
    documents = sum(t.documents for t in totals.values())
    scripts = {}
    for sid in all_sample.scripts():
        m = Metrics(documents=documents, vocab_types_used=all_sample.script_metrics(sid).vocab_types_used)
        for part in script_parts[sid]:
            for name in COUNT_FIELDS:
                setattr(m, name, getattr(m, name) + getattr(part, name))
        if merged.blocks:
            m.sample_share = share
            m.ci95 = intervals(merged, sid, share)
        scripts[SCRIPT_NAMES[sid]] = m
    return languages, scripts


def _sources(texts, max_chars: int | None, progress: bool, errors: str,
             source_label: str) -> Iterator[tuple[str, str, Iterator[list[str]], dict]]:
    """(language, label, batches of documents, info dict filled in as the batches are consumed)."""
    if isinstance(texts, Mapping):
        for lang, docs in texts.items():
            if isinstance(docs, str):
                raise TypeError(f"texts[{lang!r}] must be a sequence of documents, not one string")
            kept = head_documents([d for d in docs if d.strip()], max_chars)
            if not kept:
                raise TextError(f"texts[{lang!r}]: no documents (expected non-blank strings)")
            info = {"documents": len(kept), "chars": sum(map(len, kept)), "bad_utf8": 0}
            yield lang, source_label, _chunks(iter(kept)), info
        return
    for source in texts:
        counters: dict = {}
        info: dict = {}
        bar = tqdm(total=max_chars, unit="char", unit_scale=True, desc=f"{source.lang}: {Path(source.spec).name}",
                   disable=not progress, leave=False)
        docs = (d.text for d in iter_documents(source, max_chars=max_chars, errors=errors,
                                                          counters=counters))
        yield source.lang, source.spec, _chunks(docs, bar), info
        info.update(field=source.field, documents=counters.get("documents", 0), chars=counters.get("chars", 0),
                    bad_utf8=counters.get("bad_utf8", 0))


def head_documents(docs: list[str], max_chars: int | None) -> list[str]:
    """The first whole documents up to ``max_chars`` characters (all of them for None); a document longer than
    ``max_chars`` itself is cut to what remains of it."""
    if max_chars is None:
        return docs
    kept, total = [], 0
    for d in docs:
        if total >= max_chars:
            break
        kept.append(d if len(d) <= max_chars else cut_head(d, max_chars - total))  # as iter_documents cuts
        total += len(kept[-1])
    return kept


def _chunks(docs: Iterator[str], bar=None) -> Iterator[list[str]]:
    """Batches of ``docs``; ``bar`` (a progress bar) is closed when they end, also by an error in the text, so
    that the error's one line is not printed after a half-drawn bar."""
    batch: list[str] = []
    chars = 0
    try:
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
    finally:
        if bar is not None:
            bar.close()
