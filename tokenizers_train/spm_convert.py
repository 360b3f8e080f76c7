"""A sentencepiece model (as ``backends`` trains it) rewritten as an HF ``tokenizer.json`` with the same ids.

Only the settings ``backends._train_spm`` uses are handled: identity normalisation on ``corpus.read.normalize``d
text (the HF file carries ``NFC``, the same function), no dummy prefix, no whitespace collapsing, whitespace
as a ``▁`` prefix that starts a word, byte fallback, and the special tokens as user-defined symbols (HF:
special added tokens, matched before the model as sentencepiece matches user-defined symbols). Unigram keeps
the piece scores (the same Viterbi); BPE's merges are rebuilt from the piece ranks. ``convert`` checks its
result against sentencepiece on the given lines and refuses to write a file that encodes differently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from corpus.read.normalize import normalize

SPACE = "\u2581"


class ConversionError(ValueError):
    """The converted tokenizer does not encode like the sentencepiece model."""


def to_hf(model_path: Path, special_tokens: list[str]) -> Tokenizer:
    """The HF tokenizer equivalent to the sentencepiece model at ``model_path``."""
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    specials = set(special_tokens)
    if _is_unigram(sp):
        model = models.Unigram(pieces, unk_id=sp.unk_id(), byte_fallback=True)
    else:
        vocab = {p: i for i, (p, _) in enumerate(pieces)}
        model = models.BPE(vocab=vocab, merges=_bpe_merges(vocab, specials, sp), byte_fallback=True,
                           unk_token=sp.id_to_piece(sp.unk_id()))
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(" ", SPACE)])
    # sentencepiece starts a word at every run of whitespace (allow_whitespace_only_pieces) and at the first
    # character after it: "a▁▁b" -> "a", "▁▁b"
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(f"{SPACE}+[^{SPACE}]*|[^{SPACE}]+"), behavior="isolated")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(special_tokens)
    return tok


def _is_unigram(sp: spm.SentencePieceProcessor) -> bool:
    # A BPE model's scores are minus the piece rank; a Unigram's are log probabilities.
    scores = [sp.get_score(i) for i in range(sp.get_piece_size()) if not (sp.is_byte(i) or sp.is_control(i))]
    return not all(float(s).is_integer() for s in scores)


def _bpe_merges(vocab: dict[str, int], specials: set[str], sp: spm.SentencePieceProcessor) -> list[tuple[str, str]]:
    """sentencepiece BPE keeps no merges, only pieces by rank, and joins any two adjacent pieces whose
    concatenation is a piece, best-ranked first: so every split of a piece into two pieces is a merge, ranked
    by the piece's rank (ties: by the ranks of the two halves)."""
    merges = []
    for piece, rank in sorted(vocab.items(), key=lambda kv: kv[1]):
        if piece in specials or len(piece) < 2 or sp.is_byte(rank) or sp.is_control(rank) or sp.is_unknown(rank):
            continue
        splits = sorted((vocab[piece[:k]], vocab[piece[k:]], piece[:k], piece[k:]) for k in range(1, len(piece))
                        if piece[:k] in vocab and piece[k:] in vocab)
        merges.extend((left, right) for _, _, left, right in splits)
    return merges


def convert(model_path: Path, special_tokens: list[str], check_lines: Iterable[str]) -> Path:
    """Write ``tokenizer.json`` beside ``model_path``; raises :class:`ConversionError` when it encodes any of
    ``check_lines`` differently from sentencepiece."""
    tok = to_hf(model_path, special_tokens)
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    for line in check_lines:
        want = sp.encode(normalize(line))
        got = tok.encode(line, add_special_tokens=False).ids
        if got != want:
            raise ConversionError(f"the converted tokenizer encodes {line[:60]!r} as {got[:12]}..., "
                                  f"sentencepiece as {want[:12]}...")
    path = model_path.with_name("tokenizer.json")
    tok.save(str(path))
    return path
