"""The training sample: per-language text, normalised once, a held-aside validation slice, balanced in characters.

Inputs are streamed (``fertility.text.iter_documents``) and written, in the canonical form of
``corpus.read.normalize``, to one plain-text file per language (one paragraph per line) in a work folder;
memory stays bounded whatever the size of a source (:func:`holdout_split` keeps the documents it has yet to
decide on in a temporary file). A source of at least 500 documents (at ``holdout`` 0.02; about ``10 / holdout``
in general) holds aside every ``1 / holdout``-th block of ``HOLDOUT_BLOCK`` consecutive documents, starting with
the first (blocks, not single lines, so a validation paragraph's neighbours are not in training); a smaller
source, for which that first block would be more than twice its share, holds aside its last ``holdout`` share
(at least one document: every language needs something to measure), so it trains on the rest.

Each language's validation slice (at most ``max_validation_chars``) is drawn across all its sources, not filled
from the first ones given: every source gets a share of the slice proportional to its training text, and at
least ``MIN_SOURCE_SHARE`` of it where it has that much held aside (:func:`validation_quotas`); within a source
the slice takes evenly spaced held blocks. Filled in the order given, ``en/*.txt.gz`` gave a slice of 28 %
templated dialogue and 0.1 % Wikipedia, though Wikipedia is two thirds of the English text (issue 29). The
slice must measure what the tokenizer generalises to, so a held-aside document that the training text
repeats, exactly or nearly (MinHash, the corpus build's: :mod:`corpus.quality.dedup`), is dropped from it
(:func:`drop_duplicates_of_training`): the document whole or, for a multi-paragraph one, most of its lines,
since training text is stored a paragraph per line. Templated dialogue repeats its lines across the whole
file; a JSONL source given twice repeats its multi-paragraph documents.

Shares are in characters (code points), never bytes or lines: Bengali takes three UTF-8 bytes per
character, so a byte-balanced mix gives Bangla a third of the text it seems to. A language with less text
than its share is capped at its text (``max_repeats`` = 1) and the others fill the sample; with
``max_repeats`` R > 1 it is cycled (repeated) up to R times, which for frequency-based trainers is the same
as weighting it, and also lets a word seen once pass ``min_frequency``: its vocabulary then fits its few
documents. The default (``max_repeats`` None) never cycles, unless the sample would be too small for the
vocabulary: then the languages that bound it are cycled, at most AUTO_REPEATS times, up to ``min_chars``
(:func:`sample_budgets`). Either is reported, never silent (:func:`describe_sample`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from common.cli import check_label
from common.errors import InputError
from corpus.quality.clean import ngram_hashes_batch, words_batch
from corpus.quality.dedup import DedupConfig, bands
from corpus.read.normalize import normalize
from fertility.text import TextSource, iter_documents
from tokenizers_train.graphemes import mark_chars

HOLDOUT_BLOCK = 20
# Every source's least share of its language's validation slice (where it has that much held aside): enough
# text (20,000 characters of a 400,000 slice) for its own chars/token in the report to be more than noise.
MIN_SOURCE_SHARE = 0.05
# A held-aside document whose lines with words are, for this share of their characters, repeated by training
# lines is not measured: most of it can be learnt from the sample (0.8, as the corpus build's near-duplicate
# similarity, DedupConfig.threshold). On 1,990 four-paragraph documents of bn blogs and of en Wikipedia it drops
# none given once, and every held document whose twin is trained on given twice.
DUPLICATE_SHARE = 0.8
# Training lines read at once when looking for the slice's duplicates (bounded memory, numpy-sized batches).
DEDUP_BATCH_LINES = 20_000
# How many times a language's text may be used in one sample (1: never cycled, see sample_budgets); None, the
# default: never, unless the sample would hold fewer than MIN_CHARS_PER_ENTRY characters per vocabulary entry.
# Then the languages whose text bounds it are cycled, at most AUTO_REPEATS times, to reach that size. Seven
# languages at 128k, every shared source: Telugu's 3.1 M characters at a 28 % share bounded the sample at 11 M
# characters (87 per entry), English got 0.56 M of its 58 M and 4.13 chars/token on held-out text; cycled to
# 32 M, the common level of the balance rose 1 % and English to 4.21 (benchmarks/bench_multiscript.py). Two
# languages at 64k are far above the floor (21 M characters) and unchanged.
MAX_REPEATS: int | None = None
AUTO_REPEATS = 3
MIN_CHARS_PER_ENTRY = 250


@dataclass
class SourceInfo:
    """What was read from one ``--text`` source."""

    lang: str
    spec: str
    documents: int = 0
    train_chars: int = 0
    validation_chars: int = 0  # held aside (never trained on)
    # in the language's validation slice: its documents are LanguageText.validation's, in source order
    slice_documents: int = 0
    slice_chars: int = 0
    duplicates_dropped: int = 0  # held-aside documents dropped as repeated by training lines

    @property
    def genre(self) -> str:
        """The source's kind of text, from its file name: ``en/wiki-en-chinapedia.txt.gz`` -> ``wiki``."""
        name = Path(self.spec.split("::", 1)[0]).name.split(".", 1)[0]
        return name.split("-", 1)[0] or name


@dataclass
class LanguageText:
    """One language's normalised training text (a file, one paragraph per line) and its validation slice."""

    lang: str
    train_path: Path
    train_chars: int
    validation: list[str]
    alphabet: set[str] = field(default_factory=set)
    mark_chars: int = 0  # combining marks, ZWJ and ZWNJ in the training text (whole graphemes by default)


@dataclass
class PreparedText:
    """Every language's text plus what was read, and a hash of the normalised training text."""

    languages: dict[str, LanguageText]
    sources: list[SourceInfo]
    sha256: str


def holdout_split(texts: Iterable[str], holdout: float) -> Iterator[tuple[bool, str]]:
    """``(held_aside, text)`` for the documents of one source, in order.

    A source of at least ``max(2, ceil(period / 2))`` blocks (500 documents at ``holdout`` 0.02), where
    ``period = round(1 / holdout)``, holds aside every ``period``-th block of ``HOLDOUT_BLOCK`` documents,
    starting with the first: its first block is then at most twice its ``holdout`` share. A smaller source holds
    aside its last ``holdout`` share instead (at least one document, unless it has only one): in blocks, a
    21-document source would train on one. Which rule applies is known only after that many documents, so until then
    they wait in a temporary file (memory stays bounded however small ``holdout`` is and however long the
    documents)."""
    period = max(2, round(1 / holdout))
    in_blocks = HOLDOUT_BLOCK * max(2, -(-period // 2))  # documents from which the block rule applies

    def held_in_blocks(i: int) -> bool:
        return (i // HOLDOUT_BLOCK) % period == 0

    with tempfile.TemporaryFile("w+", encoding="utf-8") as waiting:
        n = 0
        for text in texts:
            if n >= in_blocks:
                yield held_in_blocks(n), text
            else:
                waiting.write(json.dumps(text, ensure_ascii=False) + "\n")  # newlines escaped: one per line
                if n + 1 == in_blocks:
                    yield from ((held_in_blocks(i), t) for i, t in enumerate(_read_back(waiting)))
            n += 1
        if n < in_blocks:
            n_held = max(1, round(n * holdout)) if n > 1 else 0
            yield from ((i >= n - n_held, t) for i, t in enumerate(_read_back(waiting)))


def _read_back(f) -> Iterator[str]:
    """The documents :func:`holdout_split` wrote to ``f``, in order."""
    f.seek(0)
    for line in f:
        yield json.loads(line)


def prepare_text(
    sources: Sequence[TextSource],
    work_dir: Path,
    *,
    holdout: float = 0.02,
    max_validation_chars: int = 400_000,
    max_chars_per_source: int | None = None,
    progress: bool = True,
    dedup: DedupConfig | None = None,
) -> PreparedText:
    """Normalise ``sources`` into ``work_dir/<lang>.txt`` and hold aside a validation slice of each language.

    ``holdout`` is the fraction of documents (in blocks) held aside; ``max_validation_chars`` caps each
    language's validation slice (kept small so that measuring it every targeting round stays cheap), which is
    drawn across the language's sources (:func:`validation_quotas`) once held-aside documents that the training
    text repeats (``dedup``: the corpus build's settings by default) are dropped. Raises
    ``fertility.TextError`` for a missing, empty or non-UTF-8 source, naming file and line.
    """
    if not 0 < holdout < 0.5:
        raise InputError(f"holdout must be a fraction in (0, 0.5), got {holdout}")
    work_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    langs: dict[str, LanguageText] = {}
    infos: list[SourceInfo] = []
    held: list[list[str]] = []  # per source, its held-aside documents (up to the language's cap)
    files = {}
    try:
        for source in sources:
            if source.lang not in langs:
                path = work_dir / f"{check_label(source.lang)}.txt"  # a label, never a path
                files[source.lang] = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed in finally)
                langs[source.lang] = LanguageText(source.lang, path, 0, [])
            lt, out = langs[source.lang], files[source.lang]
            info, kept = SourceInfo(source.lang, source.spec), HeldAside(max_validation_chars)
            docs = iter_documents(source, max_chars=max_chars_per_source)
            bar = tqdm(docs, desc=f"reading {source.lang}={source.spec}", unit=" docs", disable=not progress,
                       mininterval=1.0)
            texts = (normalize(doc.text) for doc in bar)
            for is_held, text in holdout_split(texts, holdout):
                info.documents += 1
                if is_held:
                    info.validation_chars += len(text)
                    kept.add(text)
                    continue
                for line in text.splitlines():
                    if line.strip():
                        out.write(line + "\n")
                        lt.train_chars += len(line)
                        info.train_chars += len(line)
                        lt.alphabet.update(line)
                        lt.mark_chars += mark_chars(line)
                        digest.update(line.encode() + b"\n")
            infos.append(info)
            held.append(kept.documents())
    finally:
        for f in files.values():
            f.close()
    for lang, lt in langs.items():
        mine = [i for i, info in enumerate(infos) if info.lang == lang]
        if lt.train_chars and any(held[i] for i in mine):
            kept = drop_duplicates_of_training([held[i] for i in mine], lt.train_path, dedup or DedupConfig())
            for i, docs in zip(mine, kept, strict=True):
                infos[i].duplicates_dropped = len(held[i]) - len(docs)
                held[i] = docs
        quotas = validation_quotas([infos[i].train_chars for i in mine], [sum(map(len, held[i])) for i in mine],
                                   max_validation_chars)
        for i, quota in zip(mine, quotas, strict=True):
            docs = spread(held[i], quota)
            infos[i].slice_documents, infos[i].slice_chars = len(docs), sum(map(len, docs))
            lt.validation.extend(docs)
    for lt in langs.values():
        if lt.train_chars == 0 or not lt.validation:
            documents = sum(i.documents for i in infos if i.lang == lt.lang)
            raise InputError(f"{lt.lang}: {documents} non-empty document(s) in all its sources; at least two are "
                             "needed, one to train on and one to measure (not a duplicate of the other): give "
                             "more text")
    return PreparedText(langs, infos, digest.hexdigest())


class HeldAside:
    """A source's held-aside documents, thinned to at most twice ``cap`` characters by whole blocks
    (systematic sampling: every ``stride``-th block of HOLDOUT_BLOCK held documents, the stride doubled
    whenever the kept text passes ``2 * cap``), so the slice can sample the whole source in bounded memory
    instead of its head."""

    def __init__(self, cap: int) -> None:
        self.cap, self.stride, self.seen, self.chars = cap, 1, 0, 0
        self.kept: list[tuple[int, str]] = []  # (held block number, document)

    def add(self, text: str) -> None:
        block = self.seen // HOLDOUT_BLOCK
        self.seen += 1
        if block % self.stride:
            return
        self.kept.append((block, text))
        self.chars += len(text)
        if self.chars > 2 * self.cap:
            self.stride *= 2
            self.kept = [(b, t) for b, t in self.kept if b % self.stride == 0]
            self.chars = sum(len(t) for _, t in self.kept)

    def documents(self) -> list[str]:
        return [t for _, t in self.kept]


def validation_quotas(train_chars: Sequence[int], held_chars: Sequence[int], cap: int) -> list[int]:
    """Characters of the validation slice for each of a language's sources: proportional to its training
    text, at least ``MIN_SOURCE_SHARE`` of ``cap``, never more than it has held aside; what a source cannot
    fill goes to the others in proportion to their quotas (water-filling), so the slice is full when the
    sources together have ``cap`` characters held aside."""
    total = sum(train_chars) or 1
    weight = [max(MIN_SOURCE_SHARE, t / total) if h else 0.0 for t, h in zip(train_chars, held_chars, strict=True)]
    quota = [0] * len(weight)
    free, left = {i for i, w in enumerate(weight) if w > 0}, min(cap, sum(held_chars))
    while free and left > 0:
        w = sum(weight[i] for i in free)
        full = {i for i in free if left * weight[i] / w >= held_chars[i] - quota[i]}
        if not full:
            for i in free:
                quota[i] += int(left * weight[i] / w)
            break
        for i in full:
            left -= held_chars[i] - quota[i]
            quota[i] = held_chars[i]
        free -= full
    return quota


def spread(docs: Sequence[str], chars: int) -> list[str]:
    """About ``chars`` characters of ``docs`` in evenly spaced runs of HOLDOUT_BLOCK documents (a run taken
    whenever the running fraction ``chars / total`` adds up to one), so a source's slice samples the whole of
    what it held aside, not its head; all of ``docs`` when they have no more."""
    total = sum(map(len, docs))
    if total <= chars:
        return list(docs)
    fraction, owed = chars / total, 1.0
    out, used = [], 0
    for start in range(0, len(docs), HOLDOUT_BLOCK):
        if owed >= 1:
            owed -= 1
            for doc in docs[start:start + HOLDOUT_BLOCK]:
                if used >= chars:
                    return out
                out.append(doc)
                used += len(doc)
        owed += fraction
    return out


def drop_duplicates_of_training(held: Sequence[Sequence[str]], train_path: Path,
                                config: DedupConfig) -> list[list[str]]:
    """``held`` (per source, held-aside documents) without those that the training lines of ``train_path``
    repeat: the whole document is a training line, or training lines repeat its own lines making up at least
    ``DUPLICATE_SHARE`` of the characters of its lines with words. A line or document is repeated exactly (the
    corpus build's key: case, punctuation and spacing do not count) or nearly (equal in one MinHash band of
    the corpus build's settings, :func:`corpus.quality.dedup.bands`, i.e. a word 5-gram Jaccard similarity
    around 0.8 or more). Lines are compared with lines because the training text is one paragraph per line:
    a multi-paragraph document is never one training line, yet its twin in training is all of its lines; the
    whole document is compared too, for a source that has it on one line. Streams the training text in
    batches; memory holds only the signatures of the slice's documents and of their lines."""
    flat = [doc for docs in held for doc in docs]
    pieces, starts = [], []  # document j is pieces[starts[j]], its lines (if more than one) follow it
    for doc in flat:
        starts.append(len(pieces))
        pieces.append(doc)
        lines = [line for line in doc.splitlines() if line.strip()]  # as prepare_text writes training lines
        if len(lines) > 1:
            pieces.extend(lines)
    starts.append(len(pieces))
    signer = _signer(config)
    keys, band_keys = _fingerprints(pieces, signer, config)
    exact = {}
    for j, key in enumerate(keys):
        if key is not None:
            exact.setdefault(key, []).append(j)
    near: dict[bytes, list[int]] = {}
    for j, row in enumerate(band_keys):
        for band in row:
            near.setdefault(band, []).append(j)
    repeated = np.zeros(len(pieces), dtype=bool)
    with open(train_path, encoding="utf-8") as f:
        while batch := [line.rstrip("\n") for _, line in zip(range(DEDUP_BATCH_LINES), f, strict=False)]:
            batch_keys, rows = _fingerprints(batch, signer, config)
            for key in batch_keys:
                for j in exact.get(key, ()) if key else ():
                    repeated[j] = True
            for row in rows:
                for band in row:
                    for j in near.get(band, ()):
                        repeated[j] = True
    dropped = []
    for start, end in zip(starts, starts[1:], strict=False):
        worded = [j for j in range(start + 1, end) if keys[j] is not None]  # a line with no words: nothing to learn
        chars = sum(len(pieces[j]) for j in worded)
        dup = sum(len(pieces[j]) for j in worded if repeated[j])
        dropped.append(bool(repeated[start]) or (chars > 0 and dup >= DUPLICATE_SHARE * chars))
    out, at = [], 0
    for docs in held:
        out.append([d for d, gone in zip(docs, dropped[at:at + len(docs)], strict=True) if not gone])
        at += len(docs)
    return out


def _signer(config: DedupConfig):
    """The corpus build's MinHash stage (its hash parameters and numpy signature formula), writing nowhere."""
    from corpus.engine.steps import Signatures

    with tempfile.TemporaryDirectory() as unused:
        return Signatures(unused, config)


def _fingerprints(texts: Sequence[str], signer,
                  config: DedupConfig) -> tuple[list[bytes | None], list[list[bytes]]]:
    """Per text, its exact-duplicate key and its MinHash band keys (band index + the band's hashes)."""
    ws = words_batch(list(texts))
    grams = ngram_hashes_batch([w.hashes for w in ws], config.ngram)
    index, signatures = signer.signatures(grams)
    n_bands, per_band = bands(config.threshold, config.num_perm)
    rows: list[list[bytes]] = [[] for _ in texts]
    for i, sig in zip(index.tolist(), signatures, strict=True):
        rows[i] = [b"%d:" % b + sig[b * per_band:(b + 1) * per_band].tobytes() for b in range(n_bands)]
    return [w.key if w.count else None for w in ws], rows  # no words: nothing to call a duplicate


def resolve_shares(
    chars: Mapping[str, int], shares: Mapping[str, float] | None = None, temperature: float | None = None
) -> dict[str, float]:
    """Per-language shares of the sample, in characters, summing to 1.

    Explicit ``shares`` (any positive weights, normalised) win; else ``temperature`` T gives shares
    proportional to ``chars ** (1 / T)`` (T = 1: as available; large T: uniform); else uniform.
    """
    langs = list(chars)
    if shares and temperature is not None:
        raise InputError("shares and a temperature: give one way to weigh the languages")
    if shares:
        check_shares(shares, langs)
        weights = {k: float(shares[k]) for k in langs}
    elif temperature is not None:
        if temperature <= 0:
            raise InputError(f"temperature must be positive, got {temperature}")
        weights = {k: chars[k] ** (1.0 / temperature) for k in langs}
    else:
        weights = dict.fromkeys(langs, 1.0)
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def check_shares(shares: Mapping[str, float], langs: Sequence[str]) -> None:
    """Refuse shares that do not name exactly the languages of the text, or that are not all positive."""
    unknown = set(shares) - set(langs)
    missing = set(langs) - set(shares)
    if unknown or missing:
        raise InputError(f"--shares must name exactly the --text languages {sorted(langs)}; "
                         f"unknown {sorted(unknown)}, missing {sorted(missing)}")
    if any(v <= 0 for v in shares.values()):
        raise InputError(f"--shares must be positive, got {dict(shares)}")


def sample_budgets(prepared: PreparedText, shares: Mapping[str, float], sample_chars: int | None,
                   max_repeats: int | None = MAX_REPEATS, min_chars: int = 0) -> dict[str, int]:
    """Characters to draw from each language; none gets more than ``max_repeats`` times its training text.

    ``max_repeats`` None: as 1, except that without ``sample_chars`` a sample of several languages under
    ``min_chars`` is grown towards it by cycling the languages that bound it, at most AUTO_REPEATS times and
    never past the point where every language would be cycled, every share kept.

    Without ``sample_chars``: the largest sample in which no language is used more than ``max_repeats`` times,
    i.e. (at the default of 1) the scarcest language relative to its share is used once, whole, and bounds
    the sample. With ``sample_chars``: each language its share of it, except that a language whose share is
    more than ``max_repeats`` times its text is capped there and the characters it cannot fill go to the other
    languages in proportion to their shares (if every language is capped, the sample is smaller than asked).
    Cycling a language's text past that would count each of its words ``max_repeats`` times over, which
    defeats ``min_frequency`` and gives it tokens fitted to its few documents. :func:`describe_sample` says
    what was capped, cycled or bounded.
    """
    if max_repeats is None:
        bounds = sorted(lt.train_chars / shares[k] for k, lt in prepared.languages.items())
        if sample_chars is not None or bounds[0] >= min_chars or len(bounds) == 1:
            return sample_budgets(prepared, shares, sample_chars, 1)
        # cycling is worth it only while some language still gains text (the largest bound: that language
        # used whole); cycling every language would only pass words seen once over min_frequency
        return sample_budgets(prepared, shares, int(min(min_chars, AUTO_REPEATS * bounds[0], bounds[-1])),
                              AUTO_REPEATS)
    if max_repeats < 1:
        raise InputError(f"max_repeats must be at least 1, got {max_repeats}")
    cap = {k: max_repeats * lt.train_chars for k, lt in prepared.languages.items()}
    if sample_chars is None:
        sample_chars = int(min(cap[k] / shares[k] for k in prepared.languages))
    budgets = {k: max(1, int(sample_chars * shares[k])) for k in prepared.languages}
    if all(budgets[k] <= cap[k] for k in budgets):
        return budgets
    # water-filling: cap the languages that overflow, share the rest out among the others, until none does
    free, left = dict.fromkeys(prepared.languages), sample_chars
    budgets = {}
    while free:
        total = sum(shares[k] for k in free)
        over = [k for k in free if left * shares[k] / total > cap[k]]
        if not over:
            budgets.update({k: max(1, int(round(left * shares[k] / total, 6))) for k in free})  # 1/3 / (1/3) = 1
            break
        for k in over:
            budgets[k] = cap[k]
            left -= cap[k]
            del free[k]
    return {k: budgets[k] for k in prepared.languages}


@dataclass
class LanguageSample:
    """One language in the sample: its training text, what was drawn from it, and why."""

    text_chars: int  # normalised training characters available
    sample_chars: int  # characters drawn (more than text_chars: cycled)
    asked_share: float  # the share the round asked for
    share: float  # the share it got: sample_chars / the sample's total
    repeats: float  # sample_chars / text_chars
    note: str = ""  # capped, cycled, or bounding the sample; empty otherwise


def describe_sample(prepared: PreparedText, shares: Mapping[str, float], sample_chars: int | None,
                    max_repeats: int | None = MAX_REPEATS, min_chars: int = 0) -> dict[str, LanguageSample]:
    """Per language, its text beside its share of the sample :func:`sample_budgets` draws, with a note for a
    language that was capped (it has too little text for its share), cycled (repeated, at most
    ``max_repeats`` times) or, without ``sample_chars``, the one whose text bounds the sample."""
    budgets = sample_budgets(prepared, shares, sample_chars, max_repeats, min_chars)
    total = sum(budgets.values())
    limit = 1 if max_repeats is None else max_repeats
    bound = (min(prepared.languages, key=lambda k: prepared.languages[k].train_chars / shares[k])
             if sample_chars is None and len(prepared.languages) > 1 else None)  # one language: its whole text
    out = {}
    for k, lt in prepared.languages.items():
        used, text = budgets[k], lt.train_chars
        share, note = used / total, ""
        if sample_chars is not None and used >= limit * text and share < shares[k] * 0.999:
            note = (f"{k}: capped at {used:,} characters ({limit}x its {text:,}): a {share:.1%} share "
                    f"instead of {shares[k]:.1%} (too little text; --max-repeats allows more cycling)")
        elif used > text:
            note = f"{k}: its {text:,} training characters are cycled {used / text:.2f} times to reach its share"
            if max_repeats is None:
                note += " (a sample grown for the vocabulary; --max-repeats 1 never cycles)"
        elif k == bound:
            note = (f"{k}: its {text:,} characters bound the sample ({total:,} in all): the other languages use "
                    "only part of their text")
        out[k] = LanguageSample(text, used, shares[k], share, used / text, note)
    return out


def iter_sample(prepared: PreparedText, budgets: Mapping[str, int]) -> Iterator[str]:
    """Stream the sample: each language's lines up to its character budget (:func:`_sample_lines`)."""
    for lang, budget in budgets.items():
        lt = prepared.languages[lang]
        yield from _sample_lines(lt.train_path, budget, lt.train_chars)


def _sample_lines(path: Path, budget: int, total: int) -> Iterator[str]:
    """``budget`` characters of the training file ``path`` (``total`` characters). Less than the whole file:
    lines spread evenly over all of it (a line is taken whenever the characters taken fall behind
    ``budget / total`` of those read), so every source of the language gives its part. Reading the head
    instead gave a language's first sources only: with ``en/*.txt.gz`` at a 50 % share of every shared bn
    and en file (14.8 M of English's 56 M characters) dialogue, fiction and news, and English Wikipedia, two
    thirds of the text, almost none (its validation figure 4.22, issue 29). More than the whole file: the
    file whole, then cycled from its start (``max_repeats``)."""
    used = seen = 0
    if budget < total:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                seen += len(line)
                if used < budget * seen / total:
                    yield line
                    used += len(line)
                    if used >= budget:
                        return
    while used < budget:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                yield line
                used += len(line)
                if used >= budget:
                    return
