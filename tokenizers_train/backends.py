"""Trainers: HF byte-level BPE (optionally with phrase merges) and Unigram, sentencepiece Unigram and BPE,
and the naive GPT-2 byte-level baseline. Each writes a finished tokenizer into an output folder.

``TRAINERS`` is the one registry of backends (name -> :class:`Backend`): ``--backend``'s choices
(``BACKENDS``), :func:`check_config` and :func:`train` read only it. A new backend is its training function
and one :class:`Backend` entry in ``TRAINERS``, both in this module, where its helpers are (``hf_trainer`` pads
and saves an HF tokenizer; ``byte_alphabet`` / ``char_alphabet`` are the vocabulary floors of the two kinds).

Every trainer takes ``lines``: a callable returning a fresh iterator over the normalised training lines
(the sample is streamed, and the phrase stage reads it a second time).

Phrase merges (hf-bpe, ``phrase_fraction > 0``): a second BPE stage learns merges of whole words into
multi-word tokens. Stage 1 trains on word pieces (:data:`~tokenizers_train.pretokenize.SCRIPT_AWARE_PATTERN`).
No stage-1 merge can span a space in the middle of a piece (spaces only ever start a piece), so encoding a
phrase piece (:data:`~tokenizers_train.pretokenize.PHRASE_PATTERN`) with the stage-1 merges gives exactly its
words' tokens; stage 2 is BPE over those token sequences, and its merges are appended after stage 1's, so
at encoding time they only fire once every word is complete. The result is one ordinary HF BPE model.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import sentencepiece as spm
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tqdm.auto import tqdm

from common.errors import InputError
from common.fileio import read_json, write_json
from corpus.read.normalize import normalize
from tokenizers_train import graphemes, spm_convert
from tokenizers_train.pretokenize import PHRASE_PATTERN, SCRIPT_AWARE_PATTERN, hf_pre_tokenizer, hf_split

N_RESERVED = 5
SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|pad|>"] + [f"<|reserved_{i}|>" for i in range(N_RESERVED)]
# The roles transformers gives special tokens (tokenizer_config.json); unk_token is the model's own, where it has one.
HF_ROLES = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}
VOCAB_MULTIPLE = 64
BYTE_ALPHABET = 256
SPM_CHECK_LINES = 2000
# The largest vocabulary trained: 2**20, four times the largest published ones (Gemma 3: 262,144). Token ids
# would fit far more; the bound keeps a typo (1e30) from reaching the trainers, and stage 2's symbols cover it.
MAX_VOCAB_SIZE = 1 << 20
# Stage-2 symbols (phrase merges): HF's BpeTrainer learns merges of characters, so each stage-1 token is spelled
# as one character that means nothing else there (stage 2 has no normaliser or pre-tokenizer, so any
# character but a surrogate would do). Private-use planes 15-16 first (131,070 ids: what vocabularies under
# that size always used, so their results are unchanged), then planes 1-14, then the BMP's private-use area.
_STAGE2_RANGES = ((0xF0000, 0x10FFFE), (0x10000, 0xF0000), (0xE000, 0xF900))

Lines = Callable[[], Iterable[str]]


class TrainingError(InputError):
    """A configuration or input the trainer cannot work with; the message says what was expected."""


@dataclass
class TrainConfig:
    """How to train one tokenizer."""

    backend: str = "hf-bpe"
    vocab_size: int = 64000
    min_frequency: int = 2
    # Longest token in characters (HF byte-level: in UTF-8 bytes; whole graphemes: in units). None: no limit.
    max_token_length: int | None = None
    # hf-bpe only: share of the vocabulary learned as multi-word (phrase) merges; 0 = words only.
    phrase_fraction: float = 0.0
    # hf-bpe only: learn merges over whole grapheme units, so that no token starts with a combining mark, ZWJ
    # or ZWNJ (tokenizers_train.graphemes). The command turns it on for text with marks (run.resolve_train).
    whole_graphemes: bool = False
    show_progress: bool = True


@dataclass(frozen=True)
class Backend:
    """One training backend, as ``--backend NAME`` names it."""

    name: str
    # (config, lines, out_dir) -> the tokenizer file written into out_dir (which exists)
    train: Callable[[TrainConfig, Lines, Path], Path]
    # alphabet size of the training text -> (entries the vocabulary must exceed, what they are, in words)
    alphabet: Callable[[int], tuple[int, str]]
    phrase_merges: bool = False  # TrainConfig.phrase_fraction > 0 is possible
    whole_graphemes: bool = False  # TrainConfig.whole_graphemes is possible


def byte_alphabet(alphabet_size: int) -> tuple[int, str]:
    """A byte-level model's floor: the 256 bytes and the special tokens, whatever the text."""
    return BYTE_ALPHABET + len(SPECIAL_TOKENS), "the 256-byte alphabet"


def char_alphabet(alphabet_size: int) -> tuple[int, str]:
    """A character model with byte fallback (sentencepiece): every character, the 256 byte pieces, the special
    tokens and UNK."""
    return (alphabet_size + BYTE_ALPHABET + len(SPECIAL_TOKENS) + 1,
            f"the {alphabet_size} distinct characters of the training text, 256 byte pieces")


def hf_trainer(train_tokenizer: Callable[[TrainConfig, Lines], Tokenizer]) -> Callable[[TrainConfig, Lines, Path], Path]:
    """A :attr:`Backend.train` from a function returning an HF tokenizer: padded to the vocabulary, saved."""

    def train_into(config: TrainConfig, lines: Lines, out_dir: Path) -> Path:
        return _save_hf(_pad_vocab(train_tokenizer(config, lines), config.vocab_size), out_dir)

    return train_into


def backend_named(name: str) -> Backend:
    """The registered backend ``name``; :class:`TrainingError` naming the known ones otherwise."""
    if name not in TRAINERS:
        raise TrainingError(f"unknown backend {name!r}; expected one of {', '.join(TRAINERS)}")
    return TRAINERS[name]


def check_config(config: TrainConfig, alphabet_size: int) -> None:
    """Raise :class:`TrainingError` for an unknown backend or a vocabulary the backend cannot have."""
    chosen = backend_named(config.backend)
    if config.vocab_size > MAX_VOCAB_SIZE:
        raise TrainingError(f"vocabulary size {config.vocab_size} is over the largest trained, {MAX_VOCAB_SIZE}")
    if config.vocab_size % VOCAB_MULTIPLE:
        lower = config.vocab_size // VOCAB_MULTIPLE * VOCAB_MULTIPLE
        raise TrainingError(f"vocabulary size {config.vocab_size} is not a multiple of {VOCAB_MULTIPLE} (the "
                            f"model's embedding is sized from it); use {lower} or {lower + VOCAB_MULTIPLE}")
    if not 0 <= config.phrase_fraction < 1:
        raise TrainingError(f"phrase_fraction must be in [0, 1), got {config.phrase_fraction}")
    if config.phrase_fraction and not chosen.phrase_merges:
        raise TrainingError(f"phrase merges exist only for {_having('phrase_merges')}, not {config.backend}")
    if config.whole_graphemes and not chosen.whole_graphemes:
        raise TrainingError(f"whole-grapheme training exists only for {_having('whole_graphemes')}, not {config.backend}")
    needed, what = chosen.alphabet(alphabet_size)
    if config.vocab_size <= needed:
        raise TrainingError(f"vocabulary size {config.vocab_size} is smaller than the alphabet: {what} and "
                            f"{len(SPECIAL_TOKENS)} special tokens need more than {needed} entries")


def _having(option: str) -> str:
    return ", ".join(name for name, b in TRAINERS.items() if getattr(b, option))


def train(config: TrainConfig, lines: Lines, out_dir: Path) -> Path:
    """Train the configured backend on ``lines`` and write it into ``out_dir``; returns the tokenizer file."""
    chosen = backend_named(config.backend)
    out_dir.mkdir(parents=True, exist_ok=True)
    return chosen.train(config, lines, out_dir)


def train_naive(vocab_size: int, lines: Lines, out_dir: Path, show_progress: bool = True) -> Path:
    """GPT-2's recipe on the same text: ByteLevel with its built-in GPT-2 regex, which cuts marks off letters."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=show_progress,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines(), trainer)
    out_dir.mkdir(parents=True, exist_ok=True)
    return _save_hf(_pad_vocab(tok, vocab_size), out_dir)


def _byte_level(model, pattern: str = SCRIPT_AWARE_PATTERN) -> Tokenizer:
    # No normalizer while training: the sample is already in corpus.read.normalize's form. _save_hf adds NFC.
    tok = Tokenizer(model)
    tok.pre_tokenizer = hf_pre_tokenizer(pattern)
    tok.decoder = decoders.ByteLevel()
    return tok


def _train_hf_bpe(config: TrainConfig, lines: Lines) -> Tokenizer:
    n_phrase = int(config.vocab_size * config.phrase_fraction)
    if config.whole_graphemes:
        tok = _train_whole_grapheme_words(config, lines, config.vocab_size - n_phrase)
    else:
        tok = _train_byte_bpe_words(config, lines, config.vocab_size - n_phrase)
    if n_phrase:
        tok = _add_phrase_merges(tok, lines, n_phrase, config)
    return tok


def _train_byte_bpe_words(config: TrainConfig, lines: Lines, vocab_size: int) -> Tokenizer:
    tok = _byte_level(models.BPE())
    kwargs = {"max_token_length": config.max_token_length} if config.max_token_length else {}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=config.min_frequency,
                                  special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=config.show_progress, **kwargs)
    tok.train_from_iterator(lines(), trainer)
    return tok


def _train_whole_grapheme_words(config: TrainConfig, lines: Lines, vocab_size: int) -> Tokenizer:
    try:
        vocab, merges = graphemes.train_whole_grapheme_bpe(lines(), vocab_size, SPECIAL_TOKENS,
                                                           min_frequency=config.min_frequency,
                                                           max_token_length=config.max_token_length,
                                                           show_progress=config.show_progress)
    except ValueError as e:
        raise TrainingError(str(e)) from None
    tok = _byte_level(models.BPE(vocab=vocab, merges=merges))
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


def _add_phrase_merges(tok: Tokenizer, lines: Lines, n_phrase: int, config: TrainConfig) -> Tokenizer:
    """Stage 2 (see the module docstring): BPE over the stage-1 token sequences of multi-word pieces."""
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    symbol = stage2_symbols(len(vocab))
    phrases = _count_phrases(lines(), config.show_progress)
    staged = _byte_level(models.BPE(vocab=vocab, merges=merges), PHRASE_PATTERN)
    keys = list(phrases)
    symbols: set[str] = set()
    encoded = []
    encodings = staged.encode_batch(keys, add_special_tokens=False)
    # Whole graphemes: a cluster stage 1 left in pieces (rare, or a mark with nothing before it) gives a token
    # that starts with a mark (Urdu "لٰ" + "ی"); a phrase merge must not start with it, so the sequence is cut
    # after every such token, which then can only end a phrase token, never begin one.
    loose = ({i for t, i in vocab.items() if not graphemes.starts_a_cluster(t)} if config.whole_graphemes
             else set())
    for key, enc in zip(keys, encodings, strict=True):
        for segment in _cut_after(enc.ids, loose):
            if len(segment) > 1:
                seq = "".join(symbol[i] for i in segment)
                encoded.append((seq, phrases[key]))
                symbols.update(seq)
    stage2 = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(vocab_size=len(symbols) + n_phrase, min_frequency=config.min_frequency,
                                  show_progress=config.show_progress)
    stage2.train_from_iterator(_repeat(encoded), trainer, length=sum(c for _, c in encoded))
    token_of = {symbol[i]: t for t, i in vocab.items()}

    def decode(symbols_: str) -> str:
        return "".join(token_of[c] for c in symbols_)

    for merge in json.loads(stage2.to_str())["model"]["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
        a, b = decode(left), decode(right)
        merges.append((a, b))
        vocab.setdefault(a + b, len(vocab))
    final = _byte_level(models.BPE(vocab=vocab, merges=merges), PHRASE_PATTERN)
    final.add_special_tokens(SPECIAL_TOKENS)
    return final


def stage2_symbols(n: int) -> list[str]:
    """The characters spelling stage-1 ids ``0..n-1`` in stage 2, one each, all distinct (``_STAGE2_RANGES``)."""
    symbols = [chr(c) for lo, hi in _STAGE2_RANGES for c in range(lo, min(hi, lo + n))][:n]
    if len(symbols) < n:  # not reached through check_config (MAX_VOCAB_SIZE is under the ranges' total)
        raise TrainingError(f"phrase merges: {n} stage-1 tokens, more than the {len(symbols)} stage-2 symbols "
                            f"(the largest vocabulary is {MAX_VOCAB_SIZE})")
    return symbols


def _cut_after(ids: list[int], cut: set[int]) -> Iterator[list[int]]:
    """``ids`` in runs, each ending at an id of ``cut`` (or at the end)."""
    start = 0
    for k, i in enumerate(ids):
        if i in cut:
            yield ids[start:k + 1]
            start = k + 1
    if start < len(ids):
        yield ids[start:]


def _count_phrases(lines: Iterable[str], progress: bool) -> Counter:
    split = hf_split(PHRASE_PATTERN)
    counts: Counter = Counter()
    for line in tqdm(lines, desc="phrase merges: counting multi-word pieces", unit=" lines", disable=not progress,
                     mininterval=1.0):
        counts.update(p for p, _ in split.pre_tokenize_str(line) if " " in p[1:])
    return counts


def _repeat(items: list[tuple[str, int]]) -> Iterator[str]:
    for text, count in items:
        for _ in range(count):
            yield text


def _train_hf_unigram(config: TrainConfig, lines: Lines) -> Tokenizer:
    """Unigram over characters (byte-level Unigram is many times slower to train), with sentencepiece-style
    byte fallback: the 256 ``<0xXX>`` pieces are appended with the lowest score, so no character is lost."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = hf_split(SCRIPT_AWARE_PATTERN)
    trainer = trainers.UnigramTrainer(vocab_size=config.vocab_size - BYTE_ALPHABET, special_tokens=SPECIAL_TOKENS,
                                      unk_token="<|unk|>",
                                      max_piece_length=config.max_token_length or 16,
                                      show_progress=config.show_progress)
    tok.train_from_iterator(lines(), trainer)
    spec = json.loads(tok.to_str())
    pieces = spec["model"]["vocab"]
    floor = min(score for _, score in pieces) - 1.0
    pieces.extend([f"<0x{b:02X}>", floor] for b in range(BYTE_ALPHABET))
    spec["model"]["byte_fallback"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    return tok


def _pad_vocab(tok: Tokenizer, vocab_size: int) -> Tokenizer:
    """Fill a vocabulary the trainer left short (too little text for more merges) with reserved tokens,
    so that its size is exactly the requested multiple of 64."""
    have = tok.get_vocab_size(with_added_tokens=True)
    if have > vocab_size:
        raise TrainingError(f"trainer produced {have} tokens for a vocabulary of {vocab_size}")
    tok.add_special_tokens([f"<|reserved_{i}|>" for i in range(N_RESERVED, N_RESERVED + vocab_size - have)])
    return tok


def padding(tokenizer_json: Path) -> int:
    """How many of the tokens in ``tokenizer_json`` are :func:`_pad_vocab`'s padding, not learned."""
    added = read_json(tokenizer_json)["added_tokens"]
    return max(0, sum(t["content"].startswith("<|reserved_") for t in added) - N_RESERVED)


def _save_hf(tok: Tokenizer, out_dir: Path) -> Path:
    """Write ``tok`` as ``out_dir/tokenizer.json``, with the NFC normaliser encoding needs."""
    tok.normalizer = normalizers.NFC()  # = corpus.read.normalize, so encoding sees text as training did
    path = out_dir / "tokenizer.json"
    tok.save(str(path))
    write_hf_config(path)
    return path


def write_hf_config(tokenizer_json: Path) -> None:
    """Make the folder of ``tokenizer_json`` a transformers tokenizer folder: ``tokenizer_config.json`` names the
    class and the special tokens' roles (without it ``AutoTokenizer`` loads the file with bos/eos/pad None).
    transformers 4 and 5 both read the roles from it (``special_tokens_map.json`` is only a legacy copy)."""
    model = read_json(tokenizer_json)["model"]
    unk = model["vocab"][model["unk_id"]][0] if model.get("unk_id") is not None else model.get("unk_token")
    roles = {**HF_ROLES, **({"unk_token": unk} if unk else {})}
    # no clean-up of spaces on decode: decode(encode(x)) gives back x (in canonical form), "a ." included
    write_json(tokenizer_json.parent / "tokenizer_config.json",
               {"tokenizer_class": "PreTrainedTokenizerFast", **roles, "clean_up_tokenization_spaces": False})


def _train_spm(model_type: str, config: TrainConfig, lines: Lines, out_dir: Path) -> Path:
    """sentencepiece on pre-normalised text with the identity rule, so that nothing but corpus.read.normalize ever
    touches the text: no NFKC, no whitespace collapsing, ZWNJ/ZWJ kept as characters; every character kept
    (coverage 1.0) and bytes as a fallback for characters never seen."""
    text_path = out_dir / "spm_input.txt"
    with open(text_path, "w", encoding="utf-8") as f:
        for line in lines():
            f.write(line + "\n")
    try:
        spm.SentencePieceTrainer.train(
            input=str(text_path), model_prefix=str(out_dir / "tokenizer"), model_type=model_type,
            vocab_size=config.vocab_size, character_coverage=1.0, byte_fallback=True,
            normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False,
            split_digits=False, allow_whitespace_only_pieces=True, max_sentence_length=1 << 20,
            max_sentencepiece_length=config.max_token_length or 16, user_defined_symbols=SPECIAL_TOKENS,
            unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, num_threads=os.cpu_count() or 1,
            minloglevel=0 if config.show_progress else 2, train_extremely_large_corpus=False,
        )
    except RuntimeError as e:
        raise TrainingError(f"sentencepiece could not train ({config.backend}, vocab {config.vocab_size}): {e}") from None
    finally:
        text_path.unlink(missing_ok=True)
    (out_dir / "tokenizer.vocab").unlink(missing_ok=True)
    model = out_dir / "tokenizer.model"
    try:  # the same tokenizer for transformers, checked against sentencepiece on the head of the sample
        converted = spm_convert.convert(model, SPECIAL_TOKENS, islice(lines(), SPM_CHECK_LINES))
    except spm_convert.ConversionError as e:
        raise TrainingError(f"{config.backend}: the tokenizer.json written beside the model would differ: {e}") from None
    write_hf_config(converted)
    return model


TRAINERS: dict[str, Backend] = {b.name: b for b in (
    Backend("hf-bpe", hf_trainer(_train_hf_bpe), byte_alphabet, phrase_merges=True, whole_graphemes=True),
    Backend("hf-unigram", hf_trainer(_train_hf_unigram), byte_alphabet),
    Backend("spm-unigram", functools.partial(_train_spm, "unigram"), char_alphabet),
    Backend("spm-bpe", functools.partial(_train_spm, "bpe"), char_alphabet),
)}
# The names, in order, for --backend's choices: a live view, so a backend added to TRAINERS is a choice too.
BACKENDS = TRAINERS.keys()


def spm_encode(processor: spm.SentencePieceProcessor, text: str) -> list[int]:
    """Encode as training saw the text: canonical form first (the model's own normaliser is the identity)."""
    return processor.encode(normalize(text))
