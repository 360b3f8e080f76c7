"""Script-aware pre-tokenization: the regexes and the HF pre-tokenizers built from them.

The word pattern is o200k's layout with one change that matters for Indic scripts: a word is a run of
letters *and* combining marks (``\\p{M}``: vowel signs, hasanta/virama, nukta) *and* ZWJ/ZWNJ, so no piece ever
starts with a mark and no grapheme cluster is cut. One non-letter, non-digit character (usually the space)
stays attached in front of a word, as in o200k, for every script. Digits come in groups of up to three
(``\\p{N}`` includes the Bengali digits ০-৯). The danda ``।`` and double danda ``॥`` are ``\\p{Po}``, so they
fall in the punctuation branch like ``.``.

The phrase pattern joins words separated by single spaces and punctuation, with the punctuation after them,
into one piece. It only matters for the optional second training stage (phrase merges, see
:mod:`tokenizers_train.backends`): merges learned in the first stage stay inside a word or a run of
punctuation, so a phrase piece first becomes its words' and punctuation's tokens, and later merges can then
join whole words (" of the", " করে না") and a word with its punctuation (" করে।", " said,").

With a custom ``Split``, HF's ``ByteLevel`` must run with ``use_regex=False``; otherwise it re-splits every
piece with the GPT-2 regex, which cuts marks off Bengali letters (huggingface/tokenizers#1369).
"""

from __future__ import annotations

import regex
from tokenizers import Regex, pre_tokenizers

WORD_CHARS = r"\p{L}\p{M}\u200c\u200d"
CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
_TAIL = r"|\p{N}{1,3}[\p{M}\u200c\u200d]*| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"

SCRIPT_AWARE_PATTERN = rf"[^\r\n\p{{L}}\p{{N}}]?[{WORD_CHARS}]+{CONTRACTIONS}" + _TAIL
_PUNCT = r"[^\s\p{L}\p{N}]"
# Words joined by single spaces and by the punctuation between and after them (no digits, newlines or double
# spaces): " করে।", "U.S.", " said:" become reachable as tokens (BoundlessBPE's point: merges across pieces).
PHRASE_PATTERN = (rf"[^\r\n\p{{L}}\p{{N}}]?[{WORD_CHARS}]+{CONTRACTIONS}(?:{_PUNCT}* ?[{WORD_CHARS}]+{CONTRACTIONS})*"
                  rf"{_PUNCT}*" + _TAIL)
# GPT-2's pattern (r50k in tiktoken), the one HF's ByteLevel applies by itself when use_regex=True.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

PATTERNS = {"word": SCRIPT_AWARE_PATTERN, "phrase": PHRASE_PATTERN}


def pieces(text: str, pattern: str = SCRIPT_AWARE_PATTERN) -> list[str]:
    """The pieces ``pattern`` cuts ``text`` into (Python ``regex``; the reference for the HF pre-tokenizer)."""
    return regex.findall(pattern, text)


def hf_pre_tokenizer(pattern: str = SCRIPT_AWARE_PATTERN) -> pre_tokenizers.PreTokenizer:
    """Split on ``pattern``, then map bytes to ByteLevel characters without any second regex split."""
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def hf_split(pattern: str = SCRIPT_AWARE_PATTERN) -> pre_tokenizers.PreTokenizer:
    """The split alone (for models that are not byte-level)."""
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated")
