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

Every piece is bounded (:data:`MAX_PIECE_CHARS` characters for the word split, :data:`MAX_PHRASE_WORDS` such
words for the phrase split): Thai, Chinese and Japanese are written without spaces between words, and a
rule of ``+`` would make a whole sentence or paragraph one piece. The cap cuts a long letter run only where
the next character is not a combining mark or joiner, so the cut falls between grapheme clusters. Urdu's
Arabic script needs nothing of its own: its letters are ``\\p{L}``, its harakat ``\\p{M}``, the ZWNJ inside
its words is a word character, and the Arabic-Indic digits (٠-٩, ۰-۹) are ``\\p{N}``; ``۔`` and ``،`` are
punctuation. Right-to-left order is only display: the text is stored in logical order.

With a custom ``Split``, HF's ``ByteLevel`` must run with ``use_regex=False``; otherwise it re-splits every
piece with the GPT-2 regex, which cuts marks off Bengali letters (huggingface/tokenizers#1369).
"""

from __future__ import annotations

import regex
from tokenizers import Regex, pre_tokenizers

WORD_CHARS = r"\p{L}\p{M}\u200c\u200d"
_JOINED = r"\p{M}\u200c\u200d"  # what belongs to the character before it: marks, ZWNJ, ZWJ
CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
# The longest piece of the word split, in characters. Scripts written without spaces (Thai, Chinese, Japanese)
# would otherwise give a piece per sentence or paragraph; every branch below is bounded so that no piece is
# longer than this. A word is cut only where the next character is not a mark or joiner (the lookahead backs
# off to a cluster boundary), so a cut never splits a grapheme; words of other scripts are far shorter.
MAX_PIECE_CHARS = 64
_WORD_MAX = MAX_PIECE_CHARS - 1 - 3  # minus the leading character and the longest contraction ('re)
_RUN = MAX_PIECE_CHARS // 2  # punctuation and whitespace runs: two halves (the run and its line ends)
_WORD = rf"[{WORD_CHARS}]{{1,{_WORD_MAX}}}(?![{_JOINED}])"
_TAIL = (rf"|\p{{N}}{{1,3}}[{_JOINED}]{{0,{_RUN}}}| ?[^\s\p{{L}}\p{{N}}]{{1,{_RUN - 1}}}[\r\n/]{{0,{_RUN}}}"
         rf"|\s{{0,{_RUN}}}[\r\n]{{1,{_RUN}}}|\s{{1,{MAX_PIECE_CHARS}}}(?!\S)|\s{{1,{MAX_PIECE_CHARS}}}")

SCRIPT_AWARE_PATTERN = rf"[^\r\n\p{{L}}\p{{N}}]?{_WORD}{CONTRACTIONS}" + _TAIL
_PUNCT = r"[^\s\p{L}\p{N}]"
# Words joined by single spaces and by the punctuation between and after them (no digits, newlines or double
# spaces): " করে।", "U.S.", " said:" become reachable as tokens (BoundlessBPE's point: merges across pieces).
# At most MAX_PHRASE_WORDS words (each a word piece above, with at most _RUN punctuation characters around
# it), so a phrase piece too is bounded: an unspaced script's paragraph is not one piece.
MAX_PHRASE_WORDS = 64
PHRASE_PATTERN = (rf"[^\r\n\p{{L}}\p{{N}}]?{_WORD}{CONTRACTIONS}"
                  rf"(?:{_PUNCT}{{0,{_RUN}}} ?{_WORD}{CONTRACTIONS}){{0,{MAX_PHRASE_WORDS - 1}}}"
                  rf"{_PUNCT}{{0,{_RUN}}}" + _TAIL)
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
