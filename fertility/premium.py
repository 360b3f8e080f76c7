"""Tokenization premium on line-aligned parallel text (Petrov et al. 2023).

The premium of a language against a reference is how many more tokens the same content costs: the ratio of
total tokens, and the median over sentences of the per-sentence token ratio (robust to a few long lines).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import paths
from common.errors import InputError
from fertility.text import Document, TextError, TextSource, iter_documents, parse_text_arg
from fertility.tokenizers import Tokenizer

ENCODE_BATCH = 1024


class ParallelError(TextError):
    """Parallel files that are not line-aligned; the message names both files and their line counts."""


@dataclass
class ParallelText:
    """Line-aligned sentences per language (sentence i of every language says the same thing)."""

    sentences: dict[str, list[str]]
    sources: dict[str, str]


@dataclass
class ParallelMetrics:
    """One language on the parallel text under one tokenizer."""

    sentences: int
    chars: int
    tokens: int
    chars_per_token: float
    premium: float  # total tokens / the reference's total tokens
    median_premium: float  # median over sentences of tokens / the reference's tokens

    def to_dict(self) -> dict:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def read_parallel(sources: Mapping[str, str | TextSource], max_chars: int | None = None) -> ParallelText:
    """Read line-aligned files; a different number of lines (or different blank lines) is a :class:`ParallelError`.

    With ``max_chars``, every language keeps the same first N sentences, N set by the first language.
    """
    docs: dict[str, list[Document]] = {}
    names: dict[str, str] = {}
    for lang, src in sources.items():
        source = src if isinstance(src, TextSource) else TextSource(lang, str(src))
        docs[lang] = list(iter_documents(source))
        names[lang] = source.spec
    first = next(iter(docs))
    keep = len(docs[first])
    if max_chars is not None:
        total = np.cumsum([len(d.text) for d in docs[first]])
        keep = int(min(np.searchsorted(total, max_chars) + 1, len(docs[first])))
    return aligned(docs, names, keep)


def aligned(docs: Mapping[str, Sequence[Document]], names: Mapping[str, str], keep: int | None = None) -> ParallelText:
    """The first ``keep`` sentences of documents read line by line per language (files, or pasted text in
    ``fertility serve``), once every language has its non-blank lines on the same line numbers; else a
    :class:`ParallelError` naming both sources (``names``) and their line counts."""
    langs = list(docs)
    first = langs[0]
    for lang in langs[1:]:
        a, b = docs[first], docs[lang]
        lines_a = [d.line for d in a]
        lines_b = [d.line for d in b]
        if lines_a != lines_b:
            raise ParallelError(
                f"parallel files are not line-aligned: {names[first]} has {len(a)} non-blank lines "
                f"(last line {lines_a[-1] if lines_a else 0}), {names[lang]} has {len(b)} "
                f"(last line {lines_b[-1] if lines_b else 0}); expected the same lines in both"
            )
    return ParallelText({lang: [d.text for d in d_list[:keep]] for lang, d_list in docs.items()}, dict(names))


FLORES_SPLITS = ("devtest", "dev")
FLORES_REFERENCE = "eng_Latn"


def flores_sources(folder: str | Path, split: str = "devtest") -> dict[str, TextSource]:
    """One parallel source per language of a local FLORES-200 folder (``SPLIT/LANG.SPLIT`` files, as the
    published archive ``flores200_dataset`` lays them out), labelled with FLORES codes such as ``ben_Beng``."""
    folder = Path(folder)
    if split not in FLORES_SPLITS:
        raise ParallelError(f"FLORES split {split!r}: expected one of {', '.join(FLORES_SPLITS)}")
    files = sorted((folder / split).glob(f"*.{split}")) if (folder / split).is_dir() else []
    if not files:
        raise ParallelError(f"{folder}: no {split}/*.{split} files; expected a FLORES-200 folder "
                            f"(flores200_dataset/{split}/eng_Latn.{split}, ...)")
    return {f.name[: -len(split) - 1]: TextSource(f.name[: -len(split) - 1], str(f)) for f in files}



def parallel_sources(specs: Sequence[str], flores: str | Path | None, split: str = "devtest") -> dict[str, TextSource]:
    """The parallel text of a command line, one source per language: ``--parallel LANG=PATH`` specs or a FLORES
    folder (``--flores``), never both; how every command that takes parallel text reads it."""
    parallel: dict[str, TextSource] = {}
    for spec in specs:
        source = parse_text_arg(spec, "--parallel")
        if source.lang in parallel:
            raise InputError(f"--parallel {spec}: language {source.lang!r} given twice")
        parallel[source.lang] = source
    if flores:
        if parallel:
            raise InputError("--flores and --parallel: give one source of parallel text")
        parallel = flores_sources(flores, split)
    return parallel


def add_parallel_arguments(p: argparse.ArgumentParser, *, parallel_help: str, flores_help: str) -> None:
    """``--parallel LANG=PATH`` (repeated), ``--flores DIR`` and ``--flores-split``: the parallel text of every
    command that takes one, read by :func:`parallel_sources`."""
    p.add_argument("--parallel", action="append", default=[], metavar="LANG=PATH", type=paths.input_spec(),
                   help=parallel_help)
    p.add_argument("--flores", default=None, metavar="DIR", type=paths.input_folder, help=flores_help)
    p.add_argument("--flores-split", default="devtest", choices=FLORES_SPLITS, help="the FLORES split to read")


def premium(tok: Tokenizer, text: ParallelText, reference: str) -> dict[str, ParallelMetrics]:
    """Each language's chars/token and premium against ``reference`` on ``text``, under ``tok``."""
    if reference not in text.sentences:
        raise ParallelError(f"reference language {reference!r} is not among the parallel files "
                            f"({', '.join(text.sentences)}); pass --parallel {reference}=PATH")
    counts = {lang: _token_counts(tok, sents) for lang, sents in text.sentences.items()}
    ref = counts[reference]
    out = {}
    for lang, c in counts.items():
        ok = ref > 0
        out[lang] = ParallelMetrics(
            sentences=int(c.size),
            chars=int(sum(map(len, text.sentences[lang]))),
            tokens=int(c.sum()),
            chars_per_token=float(sum(map(len, text.sentences[lang])) / c.sum()) if c.sum() else 0.0,
            premium=float(c.sum() / ref.sum()) if ref.sum() else 0.0,
            median_premium=float(np.median(c[ok] / ref[ok])) if ok.any() else 0.0,
        )
    return out


def gini(values: Sequence[float]) -> float:
    """The Gini coefficient of ``values``: the mean absolute difference over all ordered pairs, divided by
    twice the mean; 0 when all are equal, (n - 1) / n when one holds everything. TokEval's fairness figure,
    applied to the token counts of the same content in each language."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or x.sum() <= 0:
        return 0.0
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size * x.sum()))


@dataclass
class Fairness:
    """One tokenizer on parallel text: how unequal the languages' costs for the same content are."""

    reference: str
    premium: dict[str, float]  # every language's total-token premium against the reference (1 for itself)
    max_premium: float  # the largest premium of a language other than the reference
    gini: float  # Gini coefficient of the languages' token counts (reference included)

    def to_dict(self) -> dict:
        return {"reference": self.reference, "premium": {k: round(v, 6) for k, v in self.premium.items()},
                "max_premium": round(self.max_premium, 6), "gini": round(self.gini, 6)}


def fairness(parallel: Mapping[str, ParallelMetrics], reference: str) -> Fairness | None:
    """The premium table, its maximum and the Gini coefficient of the token counts, for any number of
    languages; None without parallel text (or with the reference alone)."""
    others = [k for k in parallel if k != reference]
    if reference not in parallel or not others:
        return None
    return Fairness(reference, {k: p.premium for k, p in parallel.items()},
                    max(parallel[k].premium for k in others), gini([p.tokens for p in parallel.values()]))


def _token_counts(tok: Tokenizer, sentences: Sequence[str]) -> np.ndarray:
    counts: list[int] = []
    for i in range(0, len(sentences), ENCODE_BATCH):
        counts.extend(map(len, tok.encode_ids(sentences[i:i + ENCODE_BATCH])))
    return np.asarray(counts, dtype=np.int64)
