import gzip

import pytest
import regex
from tokenizers import pre_tokenizers

from corpus.read.normalize import normalize
from tokenizers_train.pretokenize import (
    GPT2_PATTERN,
    PHRASE_PATTERN,
    SCRIPT_AWARE_PATTERN,
    hf_pre_tokenizer,
    pieces,
)


def _bangla_lines(sample_dir, n=300):
    with gzip.open(sample_dir / "bn" / "literature-bnarchive.txt.gz", "rt", encoding="utf-8") as f:
        return [normalize(next(f).rstrip("\n")) for _ in range(n)]


def _cluster_starts(text):
    starts, i = set(), 0
    for g in regex.findall(r"\X", text):
        starts.add(i)
        i += len(g)
    return starts | {len(text)}


@pytest.mark.parametrize("pattern", [SCRIPT_AWARE_PATTERN, PHRASE_PATTERN])
def test_pieces_cover_text_and_never_cut_a_grapheme_cluster(sample_dir, pattern):
    lines = _bangla_lines(sample_dir) + ["\u09a1\u09bc \u0995\u09cd\u200c\u09b7 ১২৩৪৫ ।॥ a\u0301b  \u09bf"]
    for line in lines:
        ps = pieces(line, pattern)
        assert "".join(ps) == line
        starts = _cluster_starts(line)
        pos = 0
        for p in ps:
            assert pos in starts, f"piece {p!r} starts inside a grapheme cluster of {line[:60]!r}"
            pos += len(p)


def test_gpt2_regex_cuts_marks_off_bengali_letters():
    # the trap this package exists to avoid, shown on the same text
    word = "বাংলায়"
    assert pieces(word, GPT2_PATTERN) != [word]
    assert pieces(word) == [word]


def test_marks_zwj_zwnj_danda_and_digits():
    text = "র\u200d্যাব কি\u200cছু। ১২৩৪৫ 12345 ঠিক॥"
    assert pieces(text) == ["র\u200d্যাব", " কি\u200cছু", "।", " ", "১২৩", "৪৫", " ", "123", "45", " ঠিক", "॥"]


def test_configured_split_is_the_one_applied(sample_dir):
    """HF's pipeline gives exactly the regex's pieces: ByteLevel does not re-split (use_regex=False)."""
    pre = hf_pre_tokenizer()
    for line in _bangla_lines(sample_dir, 100):
        spans = [line[a:b] for _, (a, b) in pre.pre_tokenize_str(line)]
        assert spans == pieces(line)
    # with ByteLevel's own regex switched on, marks are cut off again (huggingface/tokenizers#1369)
    resplit = pre_tokenizers.Sequence([pre_tokenizers.Split(regex.escape(" "), behavior="isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    line = "বাংলায় গান"
    assert [line[a:b] for _, (a, b) in resplit.pre_tokenize_str(line)] != pieces(line)
