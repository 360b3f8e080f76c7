"""Tokenizers loaded once per test session (loading o200k takes seconds)."""

from __future__ import annotations

import pytest

from fertility.tokenizers import load_tokenizer


@pytest.fixture(scope="session")
def gpt2(shipped_tokenizers):
    return load_tokenizer("gpt2", shipped_tokenizers)


@pytest.fixture(scope="session")
def o200k(shipped_tokenizers):
    return load_tokenizer("o200k_base", shipped_tokenizers)


@pytest.fixture(scope="session")
def shared_tok(shared_tokenizers):
    """Load a reference tokenizer from ../shared/tokenizers by known name, once per session."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_tokenizer(name, shared_tokenizers)
        return cache[name]

    return get
