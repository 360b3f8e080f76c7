"""GPT-2's and o200k's pre-tokenizer pieces found on arrays (fertility.tokenizers.pattern_pieces) are the
``regex`` engine's matches: on random strings over every character class the rules tell apart, and on real
text of several scripts through the tokenizers that use them."""

import random
from pathlib import Path

import numpy as np
import pytest
import regex

from fertility.tokenizers.hf import GPT2_PATTERN
from fertility.tokenizers.pattern_pieces import gpt2_pieces, o200k_pieces
from fertility.tokenizers.tiktoken import O200K_PATTERN

# One or more characters of each class: upper, title, lower, modifier and other letters, marks (Bengali vowel
# sign, combining acute), numbers of each kind, whitespace (with line breaks, and characters where \s and
# str.isspace disagree), punctuation with the apostrophe and slash, contraction letters in both cases and the
# long s that (?i) folds to s, a surrogate, an emoji.
ALPHABET = (list("aAbBsStTrReEvVmMlLdDxXſʰª") + ["ǅ", "অ", "ক", "ি", "\u0301", "্"] + list("0159") + ["১", "²", "Ⅻ"]
            + [" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u2028", "\x0b", "\x0c", "\x85", "\x1c"]
            + list(".,!/'''\"(-") + ["€", "।", "\x00", "\U0001F600", "\ud800"])
SHARED_XQUAD = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi" / "xquad"
FINDERS = [(gpt2_pieces, GPT2_PATTERN), (o200k_pieces, O200K_PATTERN)]


class CountingPattern:
    """A compiled pattern that counts the texts it is asked for (the engine's share of the work)."""

    def __init__(self, pattern: str) -> None:
        self.pattern, self.asked = regex.compile(pattern), 0

    def findall(self, text: str) -> list[str]:
        self.asked += 1
        return self.pattern.findall(text)


def pieces_per_text(found, texts):
    starts, ends, counts = found
    assert starts.dtype == ends.dtype == counts.dtype == np.int64
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [[t[a:b] for a, b in zip(starts[i:j].tolist(), ends[i:j].tolist(), strict=True)]
            for t, i, j in zip(texts, bounds[:-1], bounds[1:], strict=True)]


@pytest.mark.parametrize(("finder", "pattern"), FINDERS, ids=["gpt2", "o200k"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pieces_equal_the_engine_on_random_strings(finder, pattern, seed):
    rng = random.Random(seed)
    engine = regex.compile(pattern)
    for _ in range(400):
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(rng.randint(1, 6))]
        assert pieces_per_text(finder(texts, engine), texts) == [engine.findall(t) for t in texts], texts


@pytest.mark.parametrize(("finder", "pattern"), FINDERS, ids=["gpt2", "o200k"])
def test_the_engine_is_asked_only_for_the_constructs_left_to_it(finder, pattern):
    """Without marks and slashes (o200k's odd constructs but two contractions in a row), the rules alone."""
    rng = random.Random(7)
    alphabet = [c for c in ALPHABET if c not in "/\u0301ি্"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    counting = CountingPattern(pattern)
    assert pieces_per_text(finder(texts, counting), texts) == [counting.pattern.findall(t) for t in texts]
    assert counting.asked - len(texts) <= 5  # the comparison's own calls, and a few texts with a chain


@pytest.mark.parametrize(("finder", "pattern"), FINDERS, ids=["gpt2", "o200k"])
def test_edges(finder, pattern):
    texts = ["", "x", "", "'s", "it's's's", "I'LL'VE'd", "AbCDéfGH", "ABcD", "\u0301a", "!\u0301a", "a\n/b",
             "x.\n\n  \r\ny", "  ", " \n", "1234567", "a\tb  c", "", "\u0985\u09bf\u0995", ""]
    engine = regex.compile(pattern)
    assert pieces_per_text(finder(texts, engine), texts) == [engine.findall(t) for t in texts]
    assert [c.size for c in finder([], engine)] == [0, 0, 0]


@pytest.mark.parametrize("name", ["gpt2", "o200k"])
def test_tokenizers_pieces_equal_the_engine_on_real_text(name, gpt2, o200k, sample_dir):
    """The shipped sample's Bangla and English, and where ../shared is there, six more scripts."""
    from fertility.text import iter_documents

    tok = {"gpt2": gpt2, "o200k": o200k}[name]
    engine = tok._piece_pattern if name == "gpt2" else tok._pattern
    paths = [sample_dir / "bn" / "literature-bnarchive.txt.gz", sample_dir / "en" / "wiki-en-chinapedia.txt.gz"]
    paths += sorted(SHARED_XQUAD.glob("*.contexts.txt.gz"))[:6]
    docs = [d.text for p in paths if p.exists() for d in iter_documents(str(p), max_chars=30_000)]
    assert pieces_per_text(tok.pretokenize_batch(docs), docs) == [engine.findall(d) for d in docs]
