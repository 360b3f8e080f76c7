"""The pieces of two byte-level pre-tokenizer patterns, GPT-2's and o200k's, found on arrays of character
classes: the ``regex`` module's matches (the tests compare them on random strings of every character class and
on real text of twelve scripts), without its engine.

Why: in exact mode the engine was the largest cost after the encoder itself (per 1 M characters, ``findall``
took 0.25 s of gpt2's Bangla and 0.09 s of o200k's English, against o200k's whole encoder at 0.15 s;
benchmarks/results/2026-12-03-fertility-exact-2). Both patterns match every character, so their matches tile
a text, and a piece is known by where it starts: a boolean per character, set by rules that follow the
pattern's alternatives (leftmost first, greedy, with the engine's backtracking worked out below). Each
character's classes come from the pattern's own character classes, asked of ``regex`` once per code point.

A text with a construct the rules leave out (o200k: a combining mark after punctuation, ``/`` after a line
break, two contractions in a row, each rare in prose) takes the engine, text by text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import regex

_L, _N, _S, _U, _W = 1, 2, 4, 8, 16  # \p{L}, \p{N}, \s, o200k's upper-case and lower-case letter classes
_CLASSES = [(_L, regex.compile(r"\p{L}")), (_N, regex.compile(r"\p{N}")), (_S, regex.compile(r"\s")),
            (_U, regex.compile(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")),
            (_W, regex.compile(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"))]
_FOLDS = [regex.compile(f"(?i:{c})") for c in "strevmld"]  # o200k's contraction letters, in any case
_S_, _T_, _R_, _E_, _V_, _M_, _L_, _D_ = (1 << i for i in range(8))
_flags = np.zeros(0x110000, dtype=np.uint8)
_folds = np.zeros(0x110000, dtype=np.uint8)
_known = np.zeros(0x110000, dtype=bool)
LM, NUM, WS, PUNCT = 0, 1, 2, 3  # o200k's kinds of run: letters and marks, numbers, whitespace, the rest
_LETTER, _PUNCT = 0, 3  # GPT-2's kinds: \p{L}, \p{N}, \s, the rest (marks among them)


def _layout(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Code points of the texts laid end to end (three zeros after), their classes and contraction-letter bits,
    ``first`` (True at each text's first character, at the end and after it, for lookahead) and where each
    text starts (one more entry: the end)."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    unseen = ~_known[cps]
    if unseen.any():
        for cp in np.unique(cps[unseen]).tolist():
            c = chr(cp)
            _flags[cp] = sum(flag for flag, p in _CLASSES if p.fullmatch(c))
            _folds[cp] = sum(1 << i for i, p in enumerate(_FOLDS) if p.fullmatch(c))
            _known[cp] = True
    n = cps.size
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=bounds[1:])
    first = np.zeros(n + 3, dtype=bool)
    first[bounds] = True
    first[n:] = True
    cps = np.concatenate([cps, np.zeros(3, dtype=np.uint32)])
    return cps, _flags[cps], _folds[cps], first, bounds


def _tiled(starts: np.ndarray, texts: Sequence[str], bounds: np.ndarray, redo: np.ndarray,
           pattern: regex.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, counts) in local character offsets from a piece start mask over the texts laid end to
    end (a text's first character starts a piece); the texts in ``redo`` (indices) take ``pattern``'s own
    matches."""
    n = starts.size
    for i in redo.tolist():
        lengths = np.fromiter(map(len, pattern.findall(texts[i])), dtype=np.int64)
        starts[bounds[i]:bounds[i + 1]] = False
        starts[bounds[i] + np.cumsum(lengths) - lengths] = True
    g = np.flatnonzero(starts)
    ends = np.empty_like(g)
    ends[:-1] = g[1:]
    if g.size:
        ends[-1] = n
    counts = np.diff(np.searchsorted(g, bounds))
    offset = np.repeat(bounds[:-1], counts)
    return g - offset, ends - offset, counts


def _runs(kind: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each run of one kind (within a text) starts: a mask, and the runs' starts and ends."""
    n = kind.size
    new = first[:n].copy()
    new[1:] |= kind[1:] != kind[:-1]
    rs = np.flatnonzero(new)
    return new, rs, np.append(rs[1:], n)


def gpt2_pieces(texts: Sequence[str], pattern: regex.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pattern``'s matches (GPT-2's: ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``)
    in every text, as (starts, ends, counts) in local character offsets.

    A piece is a run of one kind (letters, numbers, whitespace, the rest), except: a space before a run of
    another kind joins it (`` ?``); a whitespace run before another kind leaves its last character to a piece
    of its own (``\\s+(?!\\S)`` gives the rest back), which a space then joins to what follows; a contraction
    (``'`` starting a piece, then ``s`` ... ``ll``) is a piece, the rest of its letters another.
    """
    cps, flags, _, first, bounds = _layout(texts)
    n = cps.size - 3
    kind = np.full(n, _PUNCT, dtype=np.int8)
    kind[(flags[:n] & _S) != 0] = WS
    kind[(flags[:n] & _N) != 0] = NUM
    kind[(flags[:n] & _L) != 0] = _LETTER
    starts, rs, re_ = _runs(kind, first)
    after_ws = re_[(kind[rs] == WS) & ~first[re_]]  # a run after whitespace, in the same text
    starts[after_ws - 1] = True
    starts[after_ws[cps[after_ws - 1] == 0x20]] = False
    i = np.flatnonzero(starts & (cps[:n] == 0x27))
    c1, c2 = cps[i + 1], cps[i + 2]
    one = ~first[i + 1]
    two = one & np.isin(c1, [ord(c) for c in "stmd"])
    three = one & ~first[i + 2] & (((c1 == ord("r")) | (c1 == ord("v"))) & (c2 == ord("e"))
                                   | (c1 == ord("l")) & (c2 == ord("l")))
    length = np.where(two, 2, np.where(three, 3, 0))
    i, length = i[length > 0], length[length > 0]
    starts[i + 1] = False
    end = i + length
    starts[end[end < n]] = True
    return _tiled(starts, texts, bounds, np.zeros(0, dtype=np.int64), pattern)


def o200k_pieces(texts: Sequence[str], pattern: regex.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pattern``'s matches (o200k's, ``O200K_PATTERN`` in fertility.tokenizers.tiktoken) in every text, as
    (starts, ends, counts) in local character offsets.

    Its alternatives, in order: letters ``X?U*W+C?`` and ``X?U+W*C?`` (X: one character that is not a line
    break, letter or number, marks included; U: upper-case, title-case, modifier and other letters and marks;
    W: lower-case, modifier and other letters and marks; C: a contraction in any case), ``\\p{N}{1,3}``,
    `` ?P+[\\r\\n/]*`` (P: not whitespace, letter or number), ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``, ``\\s+``. Hence:

    * whitespace: a run up to its last line break is a piece (a run after punctuation first loses its leading
      line breaks to it: ``[\\r\\n/]*``); of the rest, all but the last character, which, unless the text ends,
      is a piece of its own or the start of the next one (X before letters; a space before punctuation);
    * punctuation: a run is a piece, or with one character only and letters after it, their X;
    * numbers: pieces of three from the run's start;
    * letters and marks: within a run (or what a contraction leaves of it), a piece that has taken a W-only
      letter (lower case) ends at the next U-only letter (upper case); one that has not runs on, but gives
      the run's closing U-only letters a piece of their own (``W+`` backtracks to the last letter in W);
      a contraction after the run joins its last piece.
    """
    cps, flags, folds, first, bounds = _layout(texts)
    n = cps.size - 3
    f = flags[:n]
    upper, lower = (f & _U) != 0, (f & _W) != 0
    lm = upper | lower
    kind = np.full(n, PUNCT, dtype=np.int8)
    kind[(f & _S) != 0] = WS
    kind[(f & _N) != 0] = NUM
    kind[lm] = LM
    crlf = (cps == 10) | (cps == 13)
    space = cps == 0x20
    starts, rs, re_ = _runs(kind, first)
    run_kind = kind[rs]

    # constructs left to the engine: a mark after punctuation (``P+`` takes it, ``X`` may), ``/`` after a
    # line break (``[\\r\\n/]*`` may take it), two contractions in a row (the second joins no letters' piece)
    odd = np.zeros(n + 1, dtype=bool)
    odd[1:n] = ~first[1:n] & ((lm & ((f & _L) == 0))[1:] & (kind[:-1] == PUNCT) | (cps[1:n] == 0x2F) & crlf[:n][:-1])

    # numbers: pieces of three from the run's start
    num = run_kind == NUM
    a, e = rs[num], re_[num]
    more = (e - a - 1) // 3  # pieces after the first
    if more.any():
        a, more = a[more > 0], more[more > 0]
        rank = np.arange(int(more.sum())) - np.repeat(np.cumsum(more) - more, more)
        starts[np.repeat(a, more) + 3 * (rank + 1)] = True

    # whitespace runs [a, e)
    ws = run_kind == WS
    a, e = rs[ws], re_[ws]
    breaks = np.flatnonzero(crlf[:n])
    after_punct = ~first[a] & (kind[a - 1] == PUNCT) & crlf[a]
    a_star = a.copy()
    if after_punct.any():
        # the last break of each run of breaks (within a text)
        run_last = breaks[np.append((np.diff(breaks) != 1) | first[breaks[:-1] + 1], True)]
        a_star[after_punct] = run_last[np.searchsorted(run_last, a[after_punct])] + 1
        starts[a[after_punct]] = False
    j = np.append(-1, breaks)[np.searchsorted(breaks, e)]  # the last break before e (-1: none)
    p0 = np.where(j >= a_star, j + 1, a_star)
    starts[a_star[a_star < e]] = True
    starts[p0[p0 < e]] = True
    tail = (p0 < e) & ~first[e]
    e = e[tail]
    starts[e - 1] = True
    starts[e[(kind[e] == LM) | (kind[e] == PUNCT) & space[e - 1]]] = False

    # punctuation runs [a, e)
    pn = run_kind == PUNCT
    a, e = rs[pn], re_[pn]
    spaced = ~first[a] & space[a - 1]
    starts[a[spaced]] = False
    prefix = (e - a == 1) & ~spaced & ~first[e]
    prefix[prefix] = kind[e[prefix]] == LM
    starts[e[prefix]] = False

    # contractions after a run of letters, at r: the apostrophe and one or two letters join the run's last piece
    letters = run_kind == LM
    r = re_[letters]
    r = r[~first[r] & (cps[r] == 0x27)]
    f1, f2 = folds[r + 1], folds[r + 2]
    one = ~first[r + 1]
    two = one & ((f1 & (_S_ | _T_ | _M_ | _D_)) != 0)
    three = one & ~first[r + 2] & (((f1 & (_R_ | _V_)) != 0) & ((f2 & _E_) != 0)
                                   | ((f1 & _L_) != 0) & ((f2 & _L_) != 0))
    length = np.where(two, 2, np.where(three, 3, 0))  # with the apostrophe
    r, length = r[length > 0], length[length > 0]
    c = r + length
    inside = c < n
    inside[inside] = ~first[c[inside]] & (kind[c[inside]] == LM)
    odd[c[np.isin(c, r)]] = True  # two in a row: the first took all the letters before the second

    # inside letter runs: a segment is a run, or what a contraction leaves of one
    seg = np.zeros(n, dtype=bool)
    seg[rs[letters]] = True
    seg[c[inside]] = True
    only_upper = upper & ~lower
    opening = only_upper & ~seg  # a run of U-only letters starting inside a segment (Bangla has none)
    opening[1:] &= ~only_upper[:-1]
    x = np.flatnonzero(opening)
    if x.size:
        # since the last U-only letter or segment start before x, a W-only letter?
        bars = np.flatnonzero(only_upper | np.append(seg[1:], False))
        k = np.searchsorted(bars, x - 1, "right") - 1
        lowers = np.cumsum(lower & ~upper, dtype=np.int64)
        before = np.where(k >= 0, lowers[bars[np.maximum(k, 0)]], 0)
        lowered = lowers[x - 1] > before
        # does the run of U-only letters end its segment?
        goes_on = np.zeros(n, dtype=bool)
        goes_on[:-1] = only_upper[1:] & ~seg[1:] & ~first[1:n]
        last_upper = np.flatnonzero(only_upper & ~goes_on)
        nxt = last_upper[np.searchsorted(last_upper, x)] + 1
        inner = nxt < n
        inner[inner] = ~first[nxt[inner]] & (kind[nxt[inner]] == LM) & ~seg[nxt[inner]]
        starts[x[lowered | ~inner]] = True

    starts[r] = False  # r + 1 is no start already: the apostrophe is one punctuation character before letters
    starts[r[length == 3] + 2] = False
    starts[c[c < n]] = True

    redo = np.unique(np.searchsorted(bounds, np.flatnonzero(odd[:n]), "right") - 1)
    return _tiled(starts, texts, bounds, redo, pattern)
