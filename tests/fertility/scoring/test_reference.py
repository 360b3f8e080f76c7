"""The vectorised analysis against a plain per-document, per-token computation of every count, on real text.

The reference takes tokens straight from the tokenizer libraries (one text at a time), clusters from the
sequential UAX #29 rules (``fertility.graphemes.clusters`` on one text), words from ``str.isspace`` and pieces
from :meth:`Tokenizer.pretokenize`; only each character's script comes from ``fertility.scripts`` (tested on its own in test_scripts.py).
"""

from __future__ import annotations

import bisect
import unicodedata

import numpy as np
import pytest
import regex

from fertility import graphemes
from fertility.scoring.metrics import COUNT_FIELDS, N_SCRIPTS, count_tokens, prepare_batch
from fertility.scripts import scripted_batch
from fertility.text import iter_documents
from fertility.tokenizers import HFTokenizer
from fertility.tokenizers.hf import bytes_to_unicode

FILES = ["bn/literature-bnarchive.txt.gz", "bn/poems-pd-banglakosh.txt.gz", "en/wiki-en-chinapedia.txt.gz"]
_BYTE_OF = {c: b for b, c in bytes_to_unicode().items()}


@pytest.fixture(scope="module")
def docs(sample_dir):
    out = []
    for name in FILES:
        out += [d.text for d in iter_documents(str(sample_dir / name), max_chars=6000)]
    return out


@pytest.fixture(scope="module")
def gpt2_nfc(shipped_tokenizers):
    """GPT-2 behind an NFC normaliser: the sample's Bangla is not NFC, so this takes the library-offsets path."""
    from tokenizers import Tokenizer as HFTok
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    vocab, merges = shipped_tokenizers / "gpt2" / "vocab.json", shipped_tokenizers / "gpt2" / "merges.txt"
    tok = HFTok(models.BPE.from_file(str(vocab), str(merges)))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return HFTokenizer(tok, "gpt2-nfc", "hf", [vocab, merges])


@pytest.fixture(scope="module")
def bnlp(shared_tok):
    """A sentencepiece unigram model behind NFKC that drops extra whitespace, with UNK (no byte fallback)."""
    return shared_tok("bnlp-bn-spm")


@pytest.fixture(scope="module")
def llama2(shared_tok):
    """A sentencepiece BPE model with byte fallback and no normaliser."""
    return shared_tok("llama2")


def reference_spans(tok, text: str, aligned: bool = False) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and UTF-8 byte spans of ``text``, from the library alone.

    ``aligned``: take the library's character offsets, as the adapter does for a whole batch when its
    normaliser changes the length of any text in it.
    """
    if tok.kind == "sentencepiece":
        return _sentencepiece_spans(tok, text)
    if tok.kind == "tiktoken":
        ids = tok._enc.encode_ordinary(text)
        lengths = [len(tok._enc.decode_single_token_bytes(i)) for i in ids]
    else:
        enc = tok._tok.encode(text, add_special_tokens=False)
        ids = enc.ids
        lengths = [len(bytes(_BYTE_OF[c] for c in t)) for t in enc.tokens]
        if aligned:
            return ids, _realigned_spans(tok, text, enc, lengths)
        if sum(lengths) != len(text.encode()):
            to_byte = np.concatenate([[0], np.cumsum([len(c.encode()) for c in text])])
            return ids, [(int(to_byte[a]), int(to_byte[b])) for a, b in enc.offsets]
    ends = np.cumsum(lengths).tolist()
    return ids, [(e - n, e) for e, n in zip(ends, lengths, strict=True)]


def _sentencepiece_spans(tok, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The library's own offsets of each piece (its protobuf output), except that a run of k byte pieces ending
    at E gives the k bytes before E one to each piece (each stands for one byte)."""
    pieces = list(tok._sp.encode(text, out_type="proto").pieces)
    spans = [(p.begin, p.end) for p in pieces]
    i = 0
    while i < len(pieces):
        j = i
        while j < len(pieces) and tok._sp.is_byte(pieces[j].id):
            j += 1
        if j > i:
            end, k = pieces[j - 1].end, j - i
            spans[i:j] = [(end - k + m, end - k + m + 1) for m in range(k)]
        i = max(j, i + 1)
    return [p.id for p in pieces], spans


def _realigned_spans(tok, text: str, enc, lengths: list[int]) -> list[tuple[int, int]]:
    """Spans that tile ``text``, token by token: each token starts at the original position of the normalised
    character its first byte falls in (the library's offset), plus the bytes into that character (never past
    the original character's last byte), and ends where the next one starts."""
    normed = tok._tok.normalizer.normalize_str(text)
    assert sum(lengths) == len(normed.encode())
    n_byte = np.concatenate([[0], np.cumsum([len(c.encode()) for c in normed])]).tolist()
    to_byte = np.concatenate([[0], np.cumsum([len(c.encode()) for c in text])]).tolist()
    starts, p = [], 0
    for k, (length, (a, _)) in enumerate(zip(lengths, enc.offsets, strict=True)):
        j = bisect.bisect_right(n_byte, p) - 1
        within = p - n_byte[j]
        pos = 0 if k == 0 else to_byte[a] + min(within, len(text[a].encode()) - 1)
        starts.append(max(pos, starts[-1]) if starts else pos)
        p += length
    return list(zip(starts, [*starts[1:], len(text.encode())], strict=True))


def reference_counts(tok, text: str, after: int | None, aligned: bool) -> tuple[dict[str, np.ndarray], dict[int, set[int]]]:
    """Every count of COUNT_FIELDS per script for one document, token by token (``after``: next text's script)."""
    out = {name: np.zeros(N_SCRIPTS) for name in COUNT_FIELDS}
    used: dict[int, set[int]] = {}
    char_script = scripted_batch([text]).char_script.tolist()
    byte_script = [s for c, s in zip(text, char_script, strict=True) for _ in c.encode()]
    to_byte = np.concatenate([[0], np.cumsum([len(c.encode()) for c in text])]).tolist()
    char_start = set(to_byte)
    clusters = np.cumsum([0, *map(len, graphemes.clusters(text))])[:-1].tolist()
    cluster_start = {to_byte[c] for c in clusters} | {to_byte[-1]}  # the document's end closes its last cluster
    n = len(byte_script)
    after = byte_script[-1] if after is None else after
    for i, c in enumerate(text):
        out["chars"][char_script[i]] += 1
        out["bytes"][char_script[i]] += len(c.encode())
    for c in clusters:
        out["graphemes"][char_script[c]] += 1

    ids, spans = reference_spans(tok, text, aligned)
    for i, (s, e) in enumerate(spans):
        flags = {"tokens": True, "unk_tokens": tok._unk_table[ids[i]], "byte_fallback_tokens": tok._byte_table[ids[i]]}
        for name, on in flags.items():
            if not on:
                continue
            if e > s:
                for b in range(s, e):
                    out[name][byte_script[b]] += 1 / (e - s)
            else:
                out[name][byte_script[min(s, n - 1)]] += 1
        middle = (s + e - 1) // 2 if e > s else min(s, n - 1)
        used.setdefault(byte_script[middle], set()).add(ids[i])
        if i < len(spans) - 1:  # a boundary belongs to the byte after it, which at the end is the next text's
            script = byte_script[e] if e < n else after
            out["boundaries"][script] += 1
            out["broken_boundaries"][script] += e not in cluster_start
            out["split_char_boundaries"][script] += e not in char_start

    words = [m.span() for m in regex.finditer(r"[^\s]+", text) if not any(c.isspace() for c in m.group())]
    assert "".join(text[a:b] for a, b in words) == "".join(c for c in text if not c.isspace())
    for a, b in words:
        ws, we = to_byte[a], to_byte[b]
        overlapping = sum(1 for s, e in spans if s < we and e > ws)
        out["words"][char_script[a]] += 1
        out["word_tokens"][char_script[a]] += overlapping
        out["continued_words"][char_script[a]] += overlapping > 1

    for a, b in tok.pretokenize(text):
        for c in range(a, b):
            out["pretokens"][char_script[c]] += 1 / (b - a)
        if a > 0 and unicodedata.category(text[a]).startswith("M"):
            out["mark_splits"][char_script[a]] += 1
    return out, used


@pytest.mark.parametrize("name", ["gpt2", "o200k", "gpt2_nfc", pytest.param("bnlp", marks=pytest.mark.shared),
                                  pytest.param("llama2", marks=pytest.mark.shared)])
def test_every_count_equals_the_reference(name, docs, request):
    tok = request.getfixturevalue(name)
    got = count_tokens(tok, prepare_batch(docs))
    want = {f: np.zeros(N_SCRIPTS) for f in COUNT_FIELDS}
    used: dict[int, set[int]] = {}
    aligned = tok.kind == "hf" and tok._tok.normalizer is not None and any(
        tok._tok.normalizer.normalize_str(t) != t for t in docs)
    assert aligned == (name == "gpt2_nfc")
    for i, text in enumerate(docs):
        after = int(scripted_batch([docs[i + 1]]).char_script[0]) if i + 1 < len(docs) else None
        counts, doc_used = reference_counts(tok, text, after, aligned)
        for f in COUNT_FIELDS:
            want[f] += counts[f]
        for sid, ids in doc_used.items():
            used.setdefault(sid, set()).update(ids)
    assert got.documents == len(docs)
    assert got.token_total == sum(len(reference_spans(tok, t)[0]) for t in docs)
    for f in COUNT_FIELDS:
        np.testing.assert_allclose(got.arrays[f], want[f], rtol=1e-12, atol=1e-9, err_msg=f)
    assert {sid: set(np.flatnonzero(u).tolist()) for sid, u in got.used.items() if u.any()} == used
    assert want["tokens"].sum() > 0 and want["broken_boundaries"].sum() > 0
    if name.startswith("gpt2"):
        assert want["mark_splits"].sum() > 0  # GPT-2's pieces cut Bangla vowel signs off their letters
