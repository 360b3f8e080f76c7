"""The project's one canonical Unicode form, shared by the trainer, the corpus builder and their tests.

Canonical form: NFC, nothing else.

* NFC, not NFKC: compatibility folding rewrites digits, ligatures and full-width forms that carry meaning.
* The three Bengali nukta letters ড় ঢ় য় (U+09DC, U+09DD, U+09DF) are composition exclusions, so NFC turns them
  into letter + NUKTA (U+09BC) and never back. We keep that decomposed form: it is what every NFC pass
  anywhere else produces, so text normalised by another tool matches ours. Both forms render the same and are
  one grapheme cluster either way.
* ZWJ (U+200D) and ZWNJ (U+200C) are kept: inside a Bangla word they choose between a conjunct and a
  visible hasanta (e.g. র‍্যাব), so removing them changes the text.
"""

from __future__ import annotations

import unicodedata

CANONICAL_FORM = "NFC"

NUKTA_LETTERS = {"\u09dc": "\u09a1\u09bc", "\u09dd": "\u09a2\u09bc", "\u09df": "\u09af\u09bc"}


def normalize(text: str) -> str:
    """Return ``text`` in the project's canonical form (NFC; nukta letters decomposed; ZWJ/ZWNJ kept)."""
    return unicodedata.normalize(CANONICAL_FORM, text)


def is_normalized(text: str) -> bool:
    """True when ``normalize(text) == text``, without building the normalised copy for the common case."""
    return unicodedata.is_normalized(CANONICAL_FORM, text)
