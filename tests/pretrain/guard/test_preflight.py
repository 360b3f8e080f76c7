"""The preflight's summary: what it says about the data beside the model."""

from __future__ import annotations

import pytest

from pretrain.guard.preflight import FEW_TOKENS_PER_ID, PreflightReport, format_preflight


def _report(train_tokens: int, vocab_size: int) -> PreflightReport:
    return PreflightReport(
        ok=True, problems=[], data={"train_tokens": train_tokens, "val_languages": {"bn": 100}, "shard_check": "ok",
                                    "tokenizer_check": "ok"},
        device={"name": "cpu", "device": "cpu", "torch": "2", "autocast": None, "compile": False, "world_size": 1},
        model={"parameters": 10, "non_embedding_parameters": 5, "vocab_size": vocab_size,
               "padded_vocab_size": vocab_size, "flops_per_token": 1e6},
        batch={"global_batch_tokens": 1024, "sequences": 8, "seq_len": 128, "micro_batch": 8, "accumulation": 1},
        memory={"total_bytes": 2**30})


@pytest.mark.parametrize(("train_tokens", "vocab_size", "noted"), [
    (600_000, 64_000, True),  # the demo's shards with a 64k vocabulary: 9 tokens an id
    (4_000_000, 64_000, False),  # 62 an id
    (600_000, 8_000, False),  # the demo: 75 an id
    (FEW_TOKENS_PER_ID * 1000 - 1, 1000, True),
    (FEW_TOKENS_PER_ID * 1000, 1000, False),
])
def test_few_training_tokens_per_vocabulary_id_get_a_note(train_tokens, vocab_size, noted):
    text = format_preflight(_report(train_tokens, vocab_size))
    assert f"{train_tokens:,} train tokens ({train_tokens / vocab_size:,.0f} per vocabulary id)" in text
    assert ("per vocabulary id: most ids are seen a few times at most" in text) is noted
