"""The validation the trainer runs every ``train.eval_interval`` steps, and that ``pretrain eval`` builds on:
loss and bits per token, character and byte per validation language (``data.eval_tokens`` targets each)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pretrain.train.data import Dataset, eval_windows
from pretrain.train.distributed import Runtime


@dataclass
class LanguageMetrics:
    loss: float  # mean NLL per target token, nats
    bits_per_token: float
    bits_per_char: float | None
    bits_per_byte: float | None
    targets: int  # target tokens evaluated


@torch.no_grad()
def nll(model: torch.nn.Module, windows: np.ndarray, micro_batch: int, runtime: Runtime) -> tuple[float, int]:
    """Total NLL (nats) over every target of ``windows`` ``(n, T + 1)``, and the number of targets."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for a in range(0, len(windows), micro_batch):
        batch = torch.from_numpy(windows[a:a + micro_batch]).to(runtime.device)
        with runtime.autocast():
            logits, _ = model(batch[:, :-1])
        total += F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(), reduction="sum").item()
        count += batch[:, 1:].numel()
    model.train(was_training)
    return total, count


def language_losses(model: torch.nn.Module, dataset: Dataset, seq_len: int, max_tokens: int, micro_batch: int,
                    runtime: Runtime) -> dict[str, float]:
    """Mean validation loss per language on the first ``max_tokens`` targets of each language."""
    return {lang: m.loss for lang, m in language_metrics(model, dataset, seq_len, max_tokens, micro_batch,
                                                         runtime).items()}


def language_metrics(model: torch.nn.Module, dataset: Dataset, seq_len: int, max_tokens: int, micro_batch: int,
                     runtime: Runtime) -> dict[str, LanguageMetrics]:
    """Loss and bits per token, character and byte for each validation language."""
    out = {}
    for lang, stream in dataset.val.items():
        total, count = nll(model, eval_windows(stream, seq_len, max_tokens), micro_batch, runtime)
        shards = dataset.manifest.split("val", language=lang)
        tokens = sum(s.tokens for s in shards)
        chars, nbytes = sum(s.chars for s in shards), sum(s.bytes for s in shards)
        bpt = total / count / math.log(2)
        out[lang] = LanguageMetrics(loss=total / count, bits_per_token=bpt,
                                    bits_per_char=bpt * tokens / chars if chars else None,
                                    bits_per_byte=bpt * tokens / nbytes if nbytes else None, targets=count)
    return out
