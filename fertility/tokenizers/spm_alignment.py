"""sentencepiece's own piece offsets, computed on arrays for a batch of texts instead of read from the library.

The library normalises a text chunk by chunk (the longest key of the model's precompiled character map, else
one character), drops extra whitespace, adds the dummy prefix and escapes spaces as ``▁``, and keeps for every
normalised byte the original byte offset of its chunk (``norm_to_orig``). The pieces lie end to end in the
normalised text; a piece's ``begin`` and ``end`` are that map at its first byte and past its last one. Reading
them from the library costs its offset-mapping or protobuf output: 2.7x and 3.7x (with reading each piece) the
encoding itself of 1 M Bangla characters (benchmarks/results/2026-12-03-fertility-exact); here the same map
comes from tables filled once per code point and the pieces' normalised lengths.

Most characters are their own replacement, so the map is the identity shifted by a constant between the few
that are not (a replaced character, a dropped space): those are the only ones looked at one by one. Positions
are counted with a space as one byte (``▁`` stands for one), as the pieces' lengths are.

A text is aligned here only where every step is the one modelled, and checked: each character is its own chunk,
or two side by side are one (a key of the map that no longer key goes on from, NFKC's "ে" + "া" -> "ো", not
overlapping another such pair, its replacement holding no space and no ``▁``; any other key longer than one
character is not modelled), no character begins a user-defined symbol, each character's replacement is one
space or holds no space and no ``▁``, no replacement is empty where extra whitespace is dropped, and the pieces'
lengths add up to the normalised text's. An UNK piece (a model without byte fallback) covers the run of chunks
with no piece for any of their characters from where it starts, and the piece after it must start with the
character that ends the run. Any other text is left to the library (``ok`` false). A byte piece may end inside
a character, where the map says the character's start; only the end of a run of byte pieces is read afterwards
(``sentencepiece._spread_byte_runs``), which is a character's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPACE_SYMBOL = "\u2581"
_N_CODEPOINTS = 0x110000
# A character's flags, one table lookup per character: its UTF-8 bytes less one (two bits); its replacement is
# one space; left to the library (a replacement holding a space or "▁" or over _MAX_BYTES, a user-defined
# symbol's first character); its replacement is not itself; a key of the map goes on past it; its replacement
# is empty; classified.
_WIDTH, _SPACE, _OTHER, _CHANGED, _GOES_ON, _EMPTY, _KNOWN = 3, 4, 8, 16, 32, 64, 128
_MAX_BYTES = 127
# A chunk's characters: all without a piece of their own (an UNK run goes on); all with one (the run stops);
# some with, some without (a run would stop inside the chunk: left to the library).
_PIECELESS, _STOPS, _MIXED = 2, 0, 1
_LABEL = (1 << 31) | 0xFF
_VALUE = (1 << 31) - 1


def _offset(unit):
    """Where a darts-clone unit's children are, relative to it (an int or an array of them)."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


@dataclass(frozen=True)
class _CharsMap:
    """The precompiled character map: a darts-clone double array and the replacements its leaves point into."""

    units: np.ndarray
    replacements: bytes

    @classmethod
    def parse(cls, blob: bytes) -> _CharsMap | None:
        if not blob:
            return None
        size = int.from_bytes(blob[:4], "little")
        return cls(np.frombuffer(blob[4:4 + size], dtype="<u4").astype(np.int64), blob[4 + size:])

    def root(self) -> int:
        return _offset(int(self.units[0]))

    def lookup(self, data: bytes) -> tuple[int, bytes | None]:
        """The node after ``data`` (-1: no key starts with it) and the replacement of ``data`` when it is a key."""
        units, node = self.units, self.root()
        unit = 0
        for byte in data:
            child = node ^ byte
            if child >= units.size or int(units[child]) & _LABEL != byte:
                return -1, None
            unit = int(units[child])
            node = child ^ _offset(unit)
        rep = None
        if (unit >> 8) & 1:
            start = int(units[node]) & _VALUE
            rep = self.replacements[start:self.replacements.index(b"\0", start)]
        return node, rep

    def next_chars(self, node: int) -> list[int]:
        """The characters some key goes on with from ``node`` (a key's second character, from its first's)."""
        out: list[int] = []
        stack = [(node, b"")]
        while stack:
            at, prefix = stack.pop()
            for byte in self._children(at):
                child = at ^ byte
                data = prefix + bytes([byte])
                try:
                    out.append(ord(data.decode()))
                except UnicodeDecodeError:  # not a whole character yet
                    if len(data) < 4:
                        stack.append((child ^ _offset(int(self.units[child])), data))
        return out

    def _children(self, node: int) -> list[int]:
        labels = np.arange(256)
        child = node ^ labels
        inside = child < self.units.size
        return labels[inside][(self.units[child[inside]] & _LABEL) == labels[inside]].tolist()


class Alignment:
    """The library's piece offsets for one sentencepiece model (see the module docstring)."""

    def __init__(self, sp, model_proto: bytes) -> None:
        from sentencepiece import sentencepiece_model_pb2 as pb

        model = pb.ModelProto()
        model.ParseFromString(model_proto)
        spec = model.normalizer_spec
        self._sp = sp
        # Modelled: spaces escaped as "▁", the dummy prefix (if any) in front; other layouts are the library's.
        self.supported = spec.escape_whitespaces and not model.trainer_spec.treat_whitespace_as_suffix
        self._dummy = 1 if spec.add_dummy_prefix else 0
        self._remove_extra = spec.remove_extra_whitespaces
        self._map = _CharsMap.parse(spec.precompiled_charsmap)
        user_defined = pb.ModelProto.SentencePiece.USER_DEFINED
        self._user_first = {p.piece[0] for p in model.pieces if p.type == user_defined and p.piece}
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        # A piece's bytes in the normalised text ("▁" one); a byte piece is one; an UNK piece's length is found
        # from the text (-1); a control piece has no place in a plain encoding (-2).
        self._norm_len = np.array([1 if sp.is_byte(i) else -1 if sp.is_unknown(i) else -2 if sp.is_control(i)
                                   else len(p.replace(SPACE_SYMBOL, " ").encode()) for i, p in enumerate(pieces)],
                                  dtype=np.int64)
        self._first_char = np.array([ord(p[0]) if p else -1 for p in pieces], dtype=np.int64)
        self._flags = np.zeros(_N_CODEPOINTS, dtype=np.uint8)
        self._length = np.zeros(_N_CODEPOINTS, dtype=np.int16)  # its replacement's bytes (a space: one)
        # the pairs of characters some key of the map starts with, as (first << 21 | second), sorted; the bytes
        # of the replacement of each that is a chunk of its own (-1: not modelled); whether a character is the
        # second of any pair
        self._pair_bytes: dict[int, int] = {}
        self._pairs = np.zeros(0, dtype=np.int64)
        self._pair_len = np.zeros(0, dtype=np.int64)
        self._second = np.zeros(_N_CODEPOINTS, dtype=bool)
        self._run = np.zeros(_N_CODEPOINTS, dtype=np.int8)  # _PIECELESS / _STOPS / _MIXED of its replacement
        self._rep_first = np.zeros(_N_CODEPOINTS, dtype=np.int32)  # its replacement's first character
        self._space_run = self._run_kind(SPACE_SYMBOL)

    def _pieceless(self, ch: str) -> bool:
        """No piece of its own: the model covers it by an UNK piece (unless a longer piece holds it)."""
        i = self._sp.piece_to_id(ch)
        return i == self._sp.unk_id() or self._sp.is_unused(i)

    def _run_kind(self, rep: str) -> int:
        flags = [self._pieceless(c) for c in rep]
        return _PIECELESS if all(flags) else _STOPS if not any(flags) else _MIXED

    def _classify(self, cps: np.ndarray) -> None:
        for cp in np.unique(cps).tolist():
            ch = chr(cp)
            data = ch.encode()
            node, rep = self._map.lookup(data) if self._map is not None else (-1, None)
            rep = data if rep is None else rep
            flags = _KNOWN | (len(data) - 1)
            following = self._map.next_chars(node) if node >= 0 else []
            if following:
                flags |= _GOES_ON
                for second in following:
                    self._pair_bytes[(cp << 21) | second] = self._pair_chunk(data + chr(second).encode())
                self._second[following] = True
            if rep == b" ":
                flags |= _SPACE
            elif b" " in rep or SPACE_SYMBOL.encode() in rep or ch in self._user_first or len(rep) > _MAX_BYTES:
                flags |= _OTHER
            flags |= _CHANGED * (rep != data) | _EMPTY * (not rep)
            self._length[cp] = len(rep)
            text = rep.decode()
            self._rep_first[cp] = ord(text[0]) if text else -1
            self._run[cp] = self._run_kind(text) if text else _PIECELESS
            self._flags[cp] = flags
        self._pairs = np.array(sorted(self._pair_bytes), dtype=np.int64)
        self._pair_len = np.array([self._pair_bytes[k] for k in self._pairs.tolist()], dtype=np.int64)

    def _pair_chunk(self, data: bytes) -> int:
        """The bytes of the replacement of two characters (``data``) when they are a chunk of their own: a key of
        the map that no longer key goes on from, replaced by a text the rest of the model holds for (no space,
        no ``▁``, not empty); else -1."""
        node, rep = self._map.lookup(data)
        if rep is None or self._map._children(node) or not rep or len(rep) > _MAX_BYTES \
                or b" " in rep or SPACE_SYMBOL.encode() in rep:
            return -1
        return len(rep)

    def spans(self, texts: list[str], ids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, ok): the library's begin and end of each piece (``ids``; ``counts`` per text) in local
        UTF-8 byte offsets, for the texts where ``ok``; the other texts' entries mean nothing."""
        n_texts = len(texts)
        joined = "".join(texts)
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        n = cps.size
        flags = self._flags.take(cps)  # take, not indexing: twice as fast on uint32 code points (no intp copy)
        if n and flags.min() < _KNOWN:
            self._classify(cps[flags < _KNOWN])
            flags = self._flags.take(cps)
        doc_char = np.zeros(n_texts + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n_texts), out=doc_char[1:])
        c2b = np.zeros(n + 1, dtype=np.int32 if 4 * n < 2**31 else np.int64)  # see scripts.scripted_batch
        np.cumsum((flags & _WIDTH) + 1, dtype=c2b.dtype, out=c2b[1:])
        doc_byte = c2b[doc_char]
        text_bytes = np.diff(doc_byte)
        bad = np.zeros(n_texts, dtype=bool)
        # (flatnonzero of bool masks: of the uint8 flags themselves it takes 5 times as long;
        # benchmarks/results/2026-12-04-fertility-spm/micro.txt, as the figures below)
        odd = np.flatnonzero((flags & (_OTHER | (_EMPTY if self._remove_extra else 0))) != 0)
        bad[np.searchsorted(doc_char, odd, "right") - 1] = True
        # a key longer than one character starts somewhere: one chunk of two characters where it is a modelled
        # pair inside one text, of no spaces, overlapping no other (``pair_at``: its first character); elsewhere
        # that text's chunks may not be what is modelled. Both characters are looked at in one mask: most Latin
        # letters begin some key, few characters are a key's second, a combining mark (0.9 ms against 4.5 for
        # the first ones' positions, then their seconds, on 1 M English characters).
        key_from = np.flatnonzero(self._second.take(cps[1:]) & ((flags[:-1] & _GOES_ON) != 0))
        pair_at = pair_len = np.zeros(0, dtype=np.int64)
        pair_text = np.zeros(n_texts, dtype=bool)
        if key_from.size:
            pair = (cps[key_from].astype(np.int64) << 21) | cps[key_from + 1]
            at = np.searchsorted(self._pairs, pair).clip(max=self._pairs.size - 1)
            found = self._pairs[at] == pair
            pair_at, pair_len = key_from[found], self._pair_len[at[found]]
            text_of = np.searchsorted(doc_char, pair_at, "right") - 1
            overlap = np.zeros(pair_at.size + 1, dtype=bool)
            overlap[1:-1] = pair_at[1:] == pair_at[:-1] + 1
            unmodelled = ((pair_len < 0) | (pair_at + 1 == doc_char[text_of + 1]) | overlap[1:] | overlap[:-1]
                          | ((flags[pair_at] | flags[pair_at + 1]) & _SPACE != 0))
            bad[text_of[unmodelled]] = True
            pair_at, pair_len = pair_at[~unmodelled], pair_len[~unmodelled]
            pair_text[text_of[~unmodelled]] = True

        # Spaces dropped: after a space or at a text's start, and at its end, where the normalised text then
        # ends at the dropped run's start; the dummy prefix stands where the leading spaces end.
        final = text_bytes.copy()  # what the normalised text's end maps to (local)
        dummy_at = np.zeros(n_texts, dtype=np.int64)
        dropped = np.zeros(0, dtype=np.int64)
        spaces = np.flatnonzero((flags & _SPACE) != 0)
        if self._remove_extra and spaces.size:
            first = np.zeros(n + 1, dtype=bool)
            first[doc_char] = True
            last = np.zeros(n + 1, dtype=bool)
            last[doc_char[1:] - 1] = True
            new_run = np.ones(spaces.size, dtype=bool)
            new_run[1:] = spaces[1:] - 1 != spaces[:-1]
            new_run |= first[spaces]
            run_of = np.cumsum(new_run) - 1
            heads = np.flatnonzero(new_run)
            tails = np.append(heads[1:], spaces.size) - 1
            at_end = np.zeros(heads.size, dtype=bool)
            at_end[run_of[last[spaces]]] = True
            drop = ~new_run | first[spaces] | at_end[run_of]
            dropped = spaces[drop]
            ending = heads[at_end]
            final[np.searchsorted(doc_char, spaces[ending], "right") - 1] = (
                c2b[spaces[ending]] - doc_byte[np.searchsorted(doc_char, spaces[ending], "right") - 1])
            leading = heads[first[spaces[heads]]]
            lead_text = np.searchsorted(doc_char, spaces[leading], "right") - 1
            dummy_at[lead_text] = c2b[spaces[tails[run_of[leading]]] + 1] - doc_byte[lead_text]

        # The characters that are not their own replacement, each text's in order: where each starts in the
        # text and in the normalised text (dummy prefix left out), and the bytes it gains or loses.
        # masks over the characters, not union1d / isin: their sorts took 2.2 ms against 0.4 ms on 1 M Bangla
        # characters (benchmarks/results/2026-12-03-fertility-exact-2/events.txt)
        # A pair's first character stands for the pair's replacement, its second for nothing.
        is_event = (flags & _CHANGED) != 0
        is_event[dropped] = True
        is_event[pair_at] = True
        is_event[pair_at + 1] = True
        events = np.flatnonzero(is_event)
        event_text = np.searchsorted(doc_char, events, "right") - 1
        out_len = self._length[cps[events]].astype(np.int64)
        gone = np.zeros(n, dtype=bool)
        if dropped.size:
            gone[dropped] = True
            out_len[gone[events]] = 0
        if pair_at.size:
            out_len[np.searchsorted(events, pair_at)] = pair_len
            out_len[np.searchsorted(events, pair_at + 1)] = 0
        delta = ((flags[events] & _WIDTH) + 1).astype(np.int64) - out_len
        text_delta = np.bincount(event_text, weights=delta, minlength=n_texts).astype(np.int64)
        delta_base = np.cumsum(text_delta) - text_delta
        before = np.concatenate([[0], np.cumsum(delta)])  # bytes gained before each event, over the batch
        event_orig = c2b[events] - doc_byte[event_text]
        event_norm = event_orig - (before[:-1] - delta_base[event_text])
        norm_chars = text_bytes - text_delta  # each text's normalised bytes, dummy prefix left out
        norm_base = np.cumsum(norm_chars) - norm_chars
        event_end = norm_base[event_text] + event_norm + out_len  # over the batch, in order

        piece_text = np.repeat(np.arange(n_texts), counts)
        plen = self._norm_len.take(ids)
        bad[piece_text[plen == -2]] = True
        first_piece = np.cumsum(counts) - counts
        some = counts > 0
        unk = unk_text = unk_start = np.zeros(0, dtype=np.int64)
        if (plen == -1).any():
            bad[pair_text & (np.bincount(piece_text[plen == -1], minlength=n_texts) > 0)] = True  # not modelled
            unk, unk_text, unk_start = self._unk_lengths(ids, plen, piece_text, bad, cps, flags, doc_char, c2b,
                                                         doc_byte, events, before, delta_base, gone)
        plen = plen.clip(0)
        ends_norm = np.cumsum(plen)
        base = np.zeros(n_texts, dtype=np.int64)
        base[some] = ends_norm[first_piece[some]] - plen[first_piece[some]]
        bad[unk_text[ends_norm[unk] - plen[unk] - base[unk_text] != unk_start]] = True  # where its run starts
        # each text's normalised bytes read off the running sum, not summed per piece by a bincount
        total = np.zeros(n_texts, dtype=np.int64)
        total[some] = ends_norm[(first_piece + counts - 1)[some]] - base[some]
        bad |= total != norm_chars + self._dummy
        # Per piece: the texts' values spread by np.repeat, not gathered through piece_text, and the few begins
        # inside a chunk or in the dummy prefix set afterwards, not chosen by np.where over every piece: fewer
        # arrays as long as the pieces. With the masks of _unk_lengths and the totals above, the same time where
        # memory is at hand, less where each call's arrays come fresh from the system (1 M Bangla characters:
        # 10.6 ms both, 22 -> 18-19 ms; benchmarks/results/2026-12-04-fertility-spm-2/README.md).
        begin = ends_norm - plen  # in the text's normalised bytes
        begin -= np.repeat(base + self._dummy, counts)
        # Each piece's begin over the batch's normalised bytes, kept inside its text so that the begins stay in
        # order (a bad text's pieces may overrun it; a dummy prefix's begin is not read); the events ending by
        # it counted from the events' side: a few thousand ends looked up among the begins, not every begin
        # among the ends (0.9 ms against 2.4 on 1 M Bangla characters).
        where = begin.clip(0, np.repeat(norm_chars, counts))
        where += np.repeat(norm_base, counts)
        k = np.cumsum(np.bincount(np.searchsorted(where, event_end, "left"), minlength=where.size + 1))[:-1]
        begins = begin + before[k]
        begins -= np.repeat(delta_base, counts)
        if events.size:  # inside a chunk that is not its own replacement: that chunk's start
            last = k.clip(max=events.size - 1)
            inside = np.flatnonzero((k < events.size) & ((event_end - out_len)[last] < where))
            begins[inside] += event_norm[last[inside]] - begin[inside]
        lead = np.flatnonzero(begin < 0)  # in the dummy prefix
        begins[lead] = dummy_at[piece_text[lead]]
        ends = np.empty_like(begins)
        ends[:-1] = begins[1:]
        ends[(first_piece + counts - 1)[some]] = final[some]
        return begins, ends, ~bad

    def _unk_lengths(self, ids, plen, piece_text, bad, cps, flags, doc_char, c2b, doc_byte, events, before,
                     delta_base, gone) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each UNK piece's normalised length, in place in ``plen``, from the runs of emitted characters with no
        piece of their own (``gone``: the dropped characters): the k-th UNK piece of a text is its k-th run, and
        the piece after it starts with the character after the run. A text where that does not hold is
        ``bad``. Returns the UNK pieces of the other texts, their texts and where their runs start (dummy prefix
        in), for the caller to check that each piece starts there once every length is known."""
        n_texts = doc_char.size - 1
        unk = np.flatnonzero(plen == -1)
        unk_text = piece_text[unk]
        if self._space_run != _STOPS:  # the dummy prefix and spaces would join runs: not modelled
            bad[unk_text] = True
            return unk[:0], unk_text[:0], unk[:0]
        # the emitted characters of the texts with UNK pieces, and their texts: masks over every character, not
        # each of those texts' characters gathered (no arrays of their positions, then of their flags, to pick
        # from; see spans)
        texts = np.unique(unk_text)
        has_unk = np.zeros(n_texts, dtype=bool)
        has_unk[texts] = True
        emitted = np.repeat(has_unk, np.diff(doc_char))
        emitted &= (flags & _EMPTY) == 0
        emitted &= ~gone
        chars = np.flatnonzero(emitted)
        owner = np.repeat(texts, np.diff(np.append(np.searchsorted(chars, doc_char[texts]), chars.size)))
        space = (flags[chars] & _SPACE) != 0
        run = np.where(space, _STOPS, self._run.take(cps[chars]))
        bad[owner[run == _MIXED]] = True
        pieceless = run == _PIECELESS
        begins_run = pieceless.copy()
        begins_run[1:] &= ~pieceless[:-1] | (owner[1:] != owner[:-1])
        ends_run = pieceless.copy()
        ends_run[:-1] &= ~pieceless[1:] | (owner[1:] != owner[:-1])
        run_start, run_end = np.flatnonzero(begins_run), np.flatnonzero(ends_run)
        run_text = owner[run_start]
        unk_count = np.bincount(unk_text, minlength=n_texts)
        bad |= (unk_count != np.bincount(run_text, minlength=n_texts)) & (unk_count > 0)
        # pair the k-th UNK piece of each good text with its k-th run
        unk, unk_text = unk[~bad[unk_text]], unk_text[~bad[unk_text]]
        keep = ~bad[run_text]
        run_start, run_end = run_start[keep], run_end[keep]

        def normalised(c: np.ndarray, t: np.ndarray) -> np.ndarray:
            """Where character ``c`` of text ``t`` starts in the text's normalised bytes (dummy prefix in)."""
            return (c2b[c] - doc_byte[t]) - (before[np.searchsorted(events, c)] - delta_base[t]) + self._dummy

        start_norm = normalised(chars[run_start], unk_text)
        last = chars[run_end]
        end_norm = normalised(last, unk_text) + np.where(space[run_end], 1, self._length[cps[last]])
        plen[unk] = end_norm - start_norm
        # the piece after each starts with the character after its run
        after = run_end + 1
        follows = unk + 1 < plen.size
        follows[follows] &= piece_text[(unk + 1)[follows]] == unk_text[follows]
        inside = after < chars.size
        inside[inside] &= owner[after[inside]] == unk_text[inside]
        wrong = inside != follows
        both = np.flatnonzero(inside & follows)
        next_char = chars[after[both]]
        expected = np.where(space[after[both]], ord(SPACE_SYMBOL), self._rep_first[cps[next_char]])
        wrong[both] |= expected != self._first_char[ids[unk[both] + 1]]
        bad[unk_text[wrong]] = True
        return unk, unk_text, start_norm
