"""Small real slices of the shipped sample, and tokenizers trained on them once per test session."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from fertility.text import TextSource
from tokenizers_train import backends, sampling

SLICE_CHARS = 80_000


def _head(path: Path, chars: int) -> list[str]:
    out, n = [], 0
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            out.append(line.rstrip("\n"))
            n += len(out[-1])
            if n >= chars:
                break
    return out


@pytest.fixture(scope="session")
def small_texts(sample_dir: Path, tmp_path_factory) -> dict[str, Path]:
    """The head (~80k characters) of one Bangla and one English sample file, as plain text files."""
    root = tmp_path_factory.mktemp("texts")
    paths = {}
    for lang, rel in (("bn", "bn/poems-pd-banglakosh.txt.gz"), ("en", "en/wiki-en-chinapedia.txt.gz")):
        paths[lang] = root / f"{lang}.txt"
        paths[lang].write_text("\n".join(_head(sample_dir / rel, SLICE_CHARS)) + "\n", encoding="utf-8")
    return paths


@pytest.fixture(scope="session")
def prepared(small_texts, tmp_path_factory) -> sampling.PreparedText:
    sources = [TextSource(lang, str(p)) for lang, p in small_texts.items()]
    return sampling.prepare_text(sources, tmp_path_factory.mktemp("work"), holdout=0.1, progress=False)


@pytest.fixture(scope="session")
def sample_lines(prepared):
    shares = sampling.resolve_shares({k: v.train_chars for k, v in prepared.languages.items()})
    budgets = sampling.sample_budgets(prepared, shares, None)
    return lambda: sampling.iter_sample(prepared, budgets)


@pytest.fixture(scope="session")
def trained(sample_lines, tmp_path_factory):
    """One small tokenizer per backend (hf-bpe with phrase merges), trained once: backend -> file."""
    root = tmp_path_factory.mktemp("trained")
    out = {}
    for backend, vocab in (("hf-bpe", 1024), ("hf-unigram", 1024), ("spm-unigram", 1024), ("spm-bpe", 1024)):
        config = backends.TrainConfig(backend=backend, vocab_size=vocab, show_progress=False,
                                      phrase_fraction=0.2 if backend == "hf-bpe" else 0.0)
        out[backend] = backends.train(config, sample_lines, root / backend)
    return out
