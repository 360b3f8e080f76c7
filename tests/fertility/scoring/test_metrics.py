"""Each metric on hand-checked Bangla strings, through tokenizers whose segmentation is known exactly."""

from itertools import chain

import numpy as np
import pytest
import regex

from fertility.scoring.metrics import count_tokens, prepare_batch
from fertility.scripts import SCRIPT_NAMES
from fertility.tokenizers import Spans, Tokenizer

KI = "কি"  # ক + vowel sign i: 2 chars, 1 cluster, 6 bytes
KSSA = "ক্ষ"  # ক + hasanta + ষ: one conjunct cluster, 3 chars, 9 bytes
KA_ZWNJ_SSA = "ক্\u200cষ"  # ZWNJ after the hasanta breaks the conjunct: 4 chars, 2 clusters, 12 bytes
YA_NUKTA = "য়"  # য + nukta (NFC form): 2 chars, 1 cluster, 6 bytes


class RegexTokenizer(Tokenizer):
    """Tokens are the matches of ``token_pattern``; pre-token pieces those of ``piece_pattern``.

    Characters in ``unk_chars`` are UNK tokens; tokens in ``byte_tokens`` are spelled as byte-fallback pieces.
    """

    kind = "hf"

    def __init__(self, token_pattern, piece_pattern=r"\S+", unk_chars="", byte_tokens=(), name="test"):
        super().__init__()
        self.name, self.path, self.fingerprint = name, "<test>", "test"
        self.vocab_size, self.bos_id, self.eos_id = 1000, None, None
        self._tokens, self._pieces = regex.compile(token_pattern), regex.compile(piece_pattern)
        self._unk_chars, self._byte_tokens = set(unk_chars), set(byte_tokens)
        self._vocab = {"<unk>": 0}

    def _id(self, s):
        return self._vocab.setdefault(s, len(self._vocab))

    def _encode(self, text):
        out = []  # (id, byte start, byte end, unk, byte)
        for m in self._tokens.finditer(text):
            start = len(text[: m.start()].encode())
            piece = m.group()
            if piece in self._byte_tokens:
                out += [(self._id(bytes([b])), start + i, start + i + 1, False, True)
                        for i, b in enumerate(piece.encode())]
            elif piece in self._unk_chars:
                out.append((0, start, start + len(piece.encode()), True, False))
            else:
                out.append((self._id(piece), start, start + len(piece.encode()), False, False))
        return out

    def encode_spans(self, texts, text_bytes=None):
        encoded = [self._encode(t) for t in texts]
        flat = np.array(list(chain.from_iterable(encoded)), dtype=np.int64).reshape(-1, 5)
        return Spans(flat[:, 0], flat[:, 1], flat[:, 2], np.array([len(e) for e in encoded]),
                     flat[:, 3].astype(bool), flat[:, 4].astype(bool))

    def encode_ids(self, texts):
        return [[t[0] for t in self._encode(text)] for text in texts]

    def decode(self, ids):
        inverse = {i: s for s, i in self._vocab.items()}
        return "".join(inverse[i] if isinstance(inverse[i], str) else "?" for i in ids)

    def pretokenize(self, text):
        return [m.span() for m in self._pieces.finditer(text)]

    def token_to_id(self, token):
        return self._vocab.get(token)

    def id_to_token(self, i):
        return {v: k for k, v in self._vocab.items()}.get(i)


PER_CHAR = RegexTokenizer(r"(?s).")
PER_CLUSTER = RegexTokenizer(r"\X")
PER_BYTE = RegexTokenizer(r"(?s).", byte_tokens={KI[0], KI[1], YA_NUKTA[0], YA_NUKTA[1]})


def bengali(tok, texts):
    counts = count_tokens(tok, prepare_batch(texts))
    return counts.script_metrics(SCRIPT_NAMES.index("Bengali")), counts


def test_vowel_sign():
    m, _ = bengali(PER_CHAR, [KI])
    assert (m.chars, m.graphemes, m.bytes, m.tokens) == (2, 1, 6, 2)
    assert (m.chars_per_token, m.graphemes_per_token, m.bytes_per_token) == (1.0, 0.5, 3.0)
    assert (m.words, m.tokens_per_word, m.continued_word_rate) == (1, 2.0, 1.0)
    assert (m.boundaries, m.broken_boundaries, m.broken_grapheme_rate) == (1, 1, 1.0)  # ক | ি splits the cluster
    assert (m.pretokens, m.pretoken_ceiling, m.split_char_boundaries) == (1, 2.0, 0)
    m, _ = bengali(PER_CLUSTER, [KI])
    assert (m.tokens, m.boundaries, m.broken_grapheme_rate, m.continued_word_rate) == (1, 0, 0.0, 0.0)


def test_hasanta_conjunct():
    m, _ = bengali(PER_CHAR, [KSSA])
    assert (m.chars, m.graphemes, m.bytes, m.tokens, m.broken_boundaries, m.boundaries) == (3, 1, 9, 3, 2, 2)
    m, _ = bengali(PER_CLUSTER, [KSSA])
    assert (m.tokens, m.graphemes_per_token, m.chars_per_token) == (1, 1.0, 3.0)


def test_zwnj():
    m, _ = bengali(PER_CHAR, [KA_ZWNJ_SSA])
    # boundaries after ক, after ্ (both inside the first cluster) and after ZWNJ (a cluster start)
    assert (m.chars, m.graphemes, m.bytes, m.boundaries, m.broken_boundaries) == (4, 2, 12, 3, 2)
    m, _ = bengali(PER_CLUSTER, [KA_ZWNJ_SSA])
    assert (m.tokens, m.boundaries, m.broken_boundaries, m.vocab_types_used) == (2, 1, 0, 2)


def test_nukta_letter_and_byte_fallback():
    m, _ = bengali(PER_BYTE, [YA_NUKTA])
    assert (m.chars, m.graphemes, m.bytes, m.tokens) == (2, 1, 6, 6)
    assert (m.byte_fallback_rate, m.bytes_per_token) == (1.0, 1.0)
    assert (m.boundaries, m.split_char_boundaries, m.broken_boundaries) == (5, 4, 5)
    precomposed, _ = bengali(PER_CHAR, ["\u09df"])  # not NFC: one code point, the analyzer counts what it gets
    assert (precomposed.chars, precomposed.graphemes, precomposed.bytes) == (1, 1, 3)


def test_code_mixed_text_by_script_and_fractional_tokens():
    words = RegexTokenizer(r"\S+|\s+")
    counts = count_tokens(words, prepare_batch(["আমি Python শিখি"]))
    bn = counts.script_metrics(SCRIPT_NAMES.index("Bengali"))
    la = counts.script_metrics(SCRIPT_NAMES.index("Latin"))
    # Bengali: "আমি " + "শিখি" (8 chars, 3 tokens: two words and a space); Latin: "Python " (7 chars, 2 tokens)
    assert (bn.chars, bn.tokens, bn.words, bn.graphemes) == (8, 3, 2, 5)
    assert (la.chars, la.tokens, la.words, la.graphemes) == (7, 2, 1, 7)
    assert bn.chars_per_token == pytest.approx(8 / 3) and la.chars_per_token == 3.5
    total = counts.total_metrics()
    assert (total.tokens, total.chars, total.words, total.tokens_per_word) == (5, 15, 3, 1.0)
    # one token over "ab কি": 3 of its 9 bytes are Latin ("ab "), 6 Bengali
    whole = count_tokens(RegexTokenizer(r"(?s).+"), prepare_batch(["ab কি"]))
    assert whole.script_metrics(SCRIPT_NAMES.index("Latin")).tokens == pytest.approx(1 / 3)
    assert whole.script_metrics(SCRIPT_NAMES.index("Bengali")).tokens == pytest.approx(2 / 3)
    assert whole.total_metrics().tokens == 1


def test_unk_rate_and_vocab_types():
    tok = RegexTokenizer(r"(?s).", unk_chars="ab")
    counts = count_tokens(tok, prepare_batch(["ab কি কি"]))
    la = counts.script_metrics(SCRIPT_NAMES.index("Latin"))
    bn = counts.script_metrics(SCRIPT_NAMES.index("Bengali"))
    assert la.unk_rate == pytest.approx(2 / 3) and bn.unk_rate == 0.0  # a, b UNK; the space after them is Latin
    assert bn.vocab_types_used == 3  # ক, ি and the space between the two words


def test_pretokenizer_that_splits_marks():
    gpt2_like = RegexTokenizer(r"(?s).", piece_pattern=r" ?\p{L}+| ?\p{M}+|\s+")
    m, _ = bengali(gpt2_like, ["কিন্তু বাংলা"])
    # pieces: ক|ি|ন|্|ত|ু|" ব"|াং|ল|া (anusvara ং is a mark too): 10 pieces, 5 of them start with a mark
    assert m.mark_splits == 5 and m.pretokens == 10
    assert m.pretoken_ceiling == pytest.approx(12 / 10)


def test_real_pretokenizers_on_bangla(gpt2, o200k):
    text = ["আমি বাংলায় গান গাই।"]
    m_gpt2, _ = bengali(gpt2, text)
    m_o200k, _ = bengali(o200k, text)
    assert m_gpt2.mark_splits > 0 and m_o200k.mark_splits == 0
    assert m_o200k.pretoken_ceiling > m_gpt2.pretoken_ceiling
    assert m_gpt2.tokens == pytest.approx(len(gpt2.encode_ids(text)[0]))
    assert m_o200k.tokens == pytest.approx(len(o200k.encode_ids(text)[0]))


def test_batches_add_up(o200k, sample_dir):
    from fertility.text import iter_documents

    docs = [d.text for d in iter_documents(str(sample_dir / "parallel" / "ben_Beng.txt.gz"), max_chars=5000)]
    whole = count_tokens(o200k, prepare_batch(docs))
    parts = count_tokens(o200k, prepare_batch(docs[:7]))
    parts.add(count_tokens(o200k, prepare_batch(docs[7:])))
    a, b = whole.total_metrics(), parts.total_metrics()
    assert a.to_dict() == b.to_dict()
    assert a.tokens == sum(map(len, o200k.encode_ids(docs))) and a.chars == sum(map(len, docs))


def dense_spread(starts, ends, unit_script, n_units):
    """The spans' density laid over every unit and summed per script, unit by unit: how the analyzer spread a
    span across a script change before it visited only the spans' own units."""
    from fertility.scoring.metrics import N_SCRIPTS

    w = 1.0 / (ends - starts)
    density = np.cumsum(np.bincount(starts, weights=w, minlength=n_units + 1)
                        - np.bincount(ends, weights=w, minlength=n_units + 1))[:n_units]
    return np.bincount(unit_script, weights=density, minlength=N_SCRIPTS)


def test_spread_over_the_spans_units_alone_gives_the_same_floats():
    """Bit for bit, including a density's rounding residue after adjacent spans (it lasts past them) and
    overlapping spans; the spans are a tokenizer's across script changes, where runs of units change script."""
    from fertility.scoring.metrics import _spread

    rng = np.random.default_rng(0)
    residues = 0
    for _ in range(300):
        n_units = int(rng.integers(2, 300))
        unit_script = np.repeat(rng.integers(0, 6, n_units), rng.integers(1, 8, n_units))[:n_units]
        starts = np.sort(rng.integers(0, n_units - 1, int(rng.integers(1, 25))))
        ends = np.minimum(starts + rng.integers(1, 12, starts.size), n_units)
        tiled = rng.random() < 0.5  # end to end, as a tokenizer's spans mostly are
        if tiled:
            ends = np.append(starts[1:], n_units)
            keep = ends > starts
            starts, ends = starts[keep], ends[keep]
        want = dense_spread(starts, ends, unit_script, n_units)
        got = _spread(starts, ends, lambda units, s=unit_script: s[units], n_units)
        np.testing.assert_array_equal(got, want)
        level = np.cumsum(np.bincount(starts, weights=1.0 / (ends - starts), minlength=n_units + 1)
                          - np.bincount(ends, weights=1.0 / (ends - starts), minlength=n_units + 1))
        residues += bool((level[ends.max():] != 0).any())
    assert residues > 0  # the case where skipping units would go wrong is among them
