"""The validation the trainer runs every ``train.eval_interval`` steps, and that ``pretrain eval`` builds on:
loss and bits per token, character and byte per validation language (``data.eval_tokens`` text tokens each).

Each validation document is scored on its own, after its BOS, exactly as `pretrain.eval.text_bits` scores a
text (:func:`score_ids` is that one scorer): BOS is never a target (predicting where the next document
starts is no part of the text), every text token is a target exactly once, and a document longer than the
context is scored in sliding windows (:func:`windows`). With every token scored (``max_tokens`` 0) bits per
byte is the summed bits over the bytes of the text the manifest counted; ``pretrain eval --text`` on the same
documents gives the same figure. Scoring windows cut from the stream instead counted the next document's BOS
and lost the context at every window start: issue 30 (B7) reported English at 3.1565 against 3.1248 exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from corpus.shards.verify import documents
from pretrain.train.data import DataError, Dataset, TokenStream
from pretrain.train.distributed import Runtime

IGNORE = -100  # cross_entropy's ignore_index: padding and context-only targets


@dataclass
class LanguageMetrics:
    loss: float  # mean NLL per scored text token, nats (BOS is never a target)
    bits_per_token: float
    bits_per_char: float | None
    bits_per_byte: float | None
    targets: int  # text tokens scored


def windows(n_ids: int, context: int) -> list[tuple[int, int, int]]:
    """``(start, first, end)`` per window over a document of ``n_ids`` ids (prefix included): the model reads
    ids ``[start, end - 1)`` and scores targets ``[first, end)``; every target 1..n_ids-1 exactly once, each
    with at least half a context before it once the document is longer than one context."""
    out, scored, stride = [], 1, max(1, context // 2)
    start = 0
    while scored < n_ids:
        end = min(start + context + 1, n_ids)
        out.append((start, scored, end))
        scored = end
        start += stride
    return out


@torch.no_grad()
def score_ids(logits: Callable[[torch.Tensor], torch.Tensor], docs: Sequence[Sequence[int]], *, prefix_id: int,
              context: int, device: torch.device, batch_size: int = 8) -> float:
    """Total NLL in bits of every token of ``docs`` (each given without its prefix), each document read after
    ``prefix_id``; ``logits`` maps ``(B, T)`` ids to ``(B, T, vocab)``. Windows are right-padded into batches
    of similar lengths; padding never changes a causal model's earlier logits."""
    pieces = []  # (input ids, targets with context-only positions ignored)
    for doc in docs:
        ids = [prefix_id, *doc]
        for start, first, end in windows(len(ids), context):
            targets = ids[start + 1:end]
            skip = first - (start + 1)
            pieces.append((ids[start:end - 1], [IGNORE] * skip + targets[skip:]))
    pieces.sort(key=lambda p: len(p[0]))  # similar lengths together: little padding
    total = 0.0
    for a in range(0, len(pieces), batch_size):
        chunk = pieces[a:a + batch_size]
        width = max(len(x) for x, _ in chunk)
        inputs = torch.tensor([x + [prefix_id] * (width - len(x)) for x, _ in chunk], device=device)
        targets = torch.tensor([y + [IGNORE] * (width - len(y)) for _, y in chunk], device=device)
        total += F.cross_entropy(logits(inputs).float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                 reduction="sum").double().item()
    return total / math.log(2)


def text_tokens(stream: TokenStream, bos: int) -> int:
    """Tokens of a validation stream that are text, not BOS."""
    return len(stream) - sum(int(np.count_nonzero(np.asarray(s) == bos)) for s in stream.shards)


def validation_documents(stream: TokenStream, bos: int, max_tokens: int) -> list[list[int]]:
    """The documents (BOS dropped) from the start of a validation stream that hold its first ``max_tokens``
    text tokens, the last one cut there (all of them when ``max_tokens`` is 0)."""
    size = len(stream) if not max_tokens else min(len(stream), max_tokens + 1)
    while True:  # with a budget, read only the head: twice as much until it holds the budget
        head = stream.window(0, size)
        if not max_tokens or size == len(stream) or int(np.count_nonzero(head != bos)) >= max_tokens:
            break
        size = min(len(stream), 2 * size)
    out, left = [], max_tokens or len(head)
    for doc in documents(head, bos):
        if left <= 0:
            break
        if len(doc):
            out.append(doc[:left].tolist())
            left -= len(out[-1])
    return out


def language_losses(model: torch.nn.Module, dataset: Dataset, seq_len: int, max_tokens: int, micro_batch: int,
                    runtime: Runtime) -> dict[str, float]:
    """Mean validation loss per language on the first ``max_tokens`` text tokens of each language."""
    return {lang: m.loss for lang, m in language_metrics(model, dataset, seq_len, max_tokens, micro_batch,
                                                         runtime).items()}


def language_metrics(model: torch.nn.Module, dataset: Dataset, seq_len: int, max_tokens: int, micro_batch: int,
                     runtime: Runtime) -> dict[str, LanguageMetrics]:
    """Loss and bits per token, character and byte for each validation language, on its first ``max_tokens``
    text tokens (0: all, and bits per byte and character are then exact). With a budget, bits per byte is the
    scored tokens' bits per token times the language's text tokens per byte."""
    bos = dataset.manifest.tokenizer.bos_id

    def logits(ids: torch.Tensor) -> torch.Tensor:
        with runtime.autocast():
            return model(ids)[0]

    was_training = model.training
    model.eval()
    out = {}
    try:
        for lang, stream in dataset.val.items():
            docs = validation_documents(stream, bos, max_tokens)
            count = sum(len(d) for d in docs)
            if not count:
                raise DataError(f"validation shards of {lang!r} hold {len(stream)} tokens and no text token to score")
            bits = score_ids(logits, docs, prefix_id=bos, context=seq_len, device=runtime.device,
                             batch_size=micro_batch)
            shards = dataset.manifest.split("val", language=lang)
            chars, nbytes = sum(s.chars for s in shards), sum(s.bytes for s in shards)
            bpt = bits / count
            # text tokens / count is 1 when every token was scored: bits / bytes, exactly.
            scale = text_tokens(stream, bos) / count
            out[lang] = LanguageMetrics(loss=bpt * math.log(2), bits_per_token=bpt,
                                        bits_per_char=bits * scale / chars if chars else None,
                                        bits_per_byte=bits * scale / nbytes if nbytes else None, targets=count)
    finally:
        model.train(was_training)
    return out
