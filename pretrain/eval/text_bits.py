"""Bits per byte and per character of any text, for a pretrain checkpoint or any HF causal-LM folder.

    pretrain eval --checkpoint CKPT --text bn=PATH --text en=PATH --out eval.json
    pretrain eval --hf DIR --text bn=PATH --out other.json      (an export, or any public causal LM)

Bits per byte (character) = the text's total negative log-likelihood in bits / its UTF-8 bytes (characters).
The denominator is the text, not the tokens, so models with different tokenizers are compared on the same
footing: the tokenizer-independent measure. Every document is scored on its own, after one prefix token
(BOS, as every training document started with it; a model without BOS uses its EOS, as lm-evaluation-harness
does), so every character of the text is predicted and none is context only.

A document longer than the context is scored in overlapping windows: each window keeps at least half a
context of preceding tokens and scores only tokens no earlier window scored (the usual sliding-window
perplexity). Windows are right-padded into batches; padding never changes a causal model's earlier logits.
The scorer is `pretrain.train.validation.score_ids`, the one the run's validation uses, so validation on a
run's held-out documents and ``--text`` on the same documents give the same bits per byte.

Text is read with ``fertility`` (any format it reads: .txt/.jsonl/.parquet, gzipped, ``LANG=PATH:FIELD``)
and put through ``corpus.read.normalize``, the cleaning the training shards had, unless ``normalize=False``;
whichever text is scored, every model sees the same characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from common.errors import InputError
from fertility.text import TextSource, iter_documents
from pretrain.train.validation import score_ids


class TextEvalError(InputError):
    """A model folder, checkpoint or text that cannot be scored; the message names it."""


@dataclass
class TextBits:
    """The summed negative log-likelihood of one language's text, and what it is divided by."""

    source: str
    documents: int
    chars: int
    bytes: int
    tokens: int  # scored tokens: the text's own, not the prefix token
    bits: float  # total NLL in bits

    @property
    def bits_per_byte(self) -> float:
        return self.bits / self.bytes

    @property
    def bits_per_char(self) -> float:
        return self.bits / self.chars

    @property
    def bits_per_token(self) -> float:
        return self.bits / self.tokens

    def to_dict(self) -> dict[str, Any]:
        return {"bits_per_byte": self.bits_per_byte, "bits_per_char": self.bits_per_char,
                "bits_per_token": self.bits_per_token, "source": self.source, "documents": self.documents,
                "chars": self.chars, "bytes": self.bytes, "tokens": self.tokens, "bits": self.bits}


@dataclass
class Scorer:
    """A causal LM as a text scorer: token ids of a text, and logits of a batch of ids."""

    path: str
    kind: str  # "checkpoint" | "hf"
    tokenizer: str  # what the card and eval.json name: spec or folder, plus sha256 where known
    encode: Callable[[list[str]], list[list[int]]]  # the texts' tokens, no special tokens
    logits: Callable[[torch.Tensor], torch.Tensor]  # (B, T) ids -> (B, T, vocab)
    prefix_id: int
    context: int
    device: torch.device


def load_scorer(path: str | Path, device: str = "auto") -> Scorer:
    """A checkpoint file (``pretrain launch``) or a folder ``transformers`` loads, in fp32 on ``device``."""
    path = Path(path)
    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
    if path.is_file():
        return _checkpoint_scorer(path, dev)
    if (path / "config.json").is_file():
        return _hf_scorer(path, dev)
    raise TextEvalError(f"{path}: neither a checkpoint file nor a folder with config.json (a transformers model)")


def _checkpoint_scorer(path: Path, dev: torch.device) -> Scorer:
    from corpus.shards.format import ShardError, TokenizerInfo
    from pretrain.release.export import model_from_checkpoint
    from pretrain.train.checkpoint import load_checkpoint

    state = load_checkpoint(path)
    model = model_from_checkpoint(state, path).to(dev).eval()
    info = state.get("tokenizer") or {}
    try:
        tok = TokenizerInfo(**info).load()
    except (ShardError, TypeError) as e:
        raise TextEvalError(f"{path}: {e}") from None
    prefix = info.get("bos_id") if info.get("bos_id") is not None else info.get("eos_id")
    if prefix is None:
        raise TextEvalError(f"{path}: the tokenizer has neither BOS nor EOS to score the first token after")
    return Scorer(str(path), "checkpoint", f"{tok.name} (sha256 {info['sha256'][:12]})", tok.encode_ids,
                  lambda ids: model(ids)[0], prefix, model.cfg.block_size, dev)


def check_hf_weights(folder: Path) -> None:
    """Every ``*.safetensors`` file of an HF folder is whole (its header parses and covers the file), or a
    :class:`TextEvalError` naming the first that is not: a copy cut short or a download that stopped is one
    line before any model runs, not a safetensors traceback. Reads only the headers."""
    from safetensors import SafetensorError, safe_open

    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(path, "pt"):
                pass
        except SafetensorError as e:
            raise TextEvalError(f"{path}: truncated or corrupt safetensors file ({e}); copy, download or export "
                                "it again") from None


def _hf_scorer(path: Path, dev: torch.device) -> Scorer:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_hf_weights(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(dev).eval()
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise TextEvalError(f"{path}: transformers cannot load it as a causal LM: {e}") from None
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if prefix is None:
        raise TextEvalError(f"{path}: the tokenizer has neither BOS nor EOS to score the first token after")
    cfg = model.config
    context = next((getattr(cfg, k) for k in ("max_position_embeddings", "n_positions", "n_ctx")
                    if getattr(cfg, k, None)), 2048)

    def encode(texts: list[str]) -> list[list[int]]:
        # A special token's string in the text ("<|endoftext|>") is text, whatever the folder's tokenizer_config
        # says: the checkpoint's tokenizer reads it so, and every model is scored on the same characters.
        return tok(texts, add_special_tokens=False, split_special_tokens=True).input_ids

    return Scorer(str(path), "hf", str(path), encode, lambda ids: model(input_ids=ids).logits, prefix,
                  context, dev)


def read_texts(source: TextSource, max_chars: int | None = None, normalize: bool = True) -> list[str]:
    """The documents of ``source`` (the first ``max_chars`` characters' worth), cleaned like the shards."""
    from corpus.read.normalize import normalize as clean

    docs = [d.text for d in iter_documents(source, max_chars=max_chars)]
    docs = [clean(d) for d in docs] if normalize else docs
    return [d for d in docs if d]


def text_bits(scorer: Scorer, source: TextSource, *, max_chars: int | None = None, normalize: bool = True,
              batch_size: int = 8) -> TextBits:
    """Bits per byte/character of one text source under ``scorer``."""
    docs = read_texts(source, max_chars, normalize)
    ids = scorer.encode(docs)
    label = source.spec if source.field == "text" else f"{source.spec}:{source.field}"  # fertility reads it back
    return TextBits(source=label, documents=len(docs), chars=sum(len(d) for d in docs),
                    bytes=sum(len(d.encode()) for d in docs), tokens=sum(len(x) for x in ids),
                    bits=score_ids(scorer.logits, ids, prefix_id=scorer.prefix_id, context=scorer.context,
                                   device=scorer.device, batch_size=batch_size))


def evaluate_texts(scorer: Scorer, sources: Sequence[TextSource], *, max_chars: int | None = None,
                   normalize: bool = True, batch_size: int = 8) -> dict[str, Any]:
    """The ``text`` section of eval.json: per language, bits per byte/char/token on the given text."""
    langs = [s.lang for s in sources]
    if len(set(langs)) != len(langs):
        raise TextEvalError(f"--text names a language twice ({', '.join(langs)}): give each language one text")
    return {"model": scorer.path, "kind": scorer.kind, "tokenizer": scorer.tokenizer, "context": scorer.context,
            "normalized": normalize, "max_chars": max_chars,
            "languages": {s.lang: text_bits(scorer, s, max_chars=max_chars, normalize=normalize,
                                            batch_size=batch_size).to_dict() for s in sources}}
