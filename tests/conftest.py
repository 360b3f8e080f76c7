"""Fixtures shared by every package's tests: the shipped sample, shipped tokenizers, and ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SHIPPED_TOKENIZERS = ROOT / "data" / "tokenizers"
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The sample corpus shipped in the repository (data/sample)."""
    return SAMPLE


@pytest.fixture(scope="session")
def shipped_tokenizers() -> Path:
    """Tokenizers shipped in the repository (gpt2, o200k_base)."""
    return SHIPPED_TOKENIZERS


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip where it is absent (a user's fresh clone)."""
    if not (SHARED / "data").is_dir():
        pytest.skip(f"needs the team's shared data at {SHARED} (absent in a fresh clone of the repository)")
    return SHARED


@pytest.fixture(scope="session")
def shared_tokenizers(shared_dir: Path) -> Path:
    path = shared_dir / "tokenizers"
    if not path.is_dir():
        pytest.skip(f"needs reference tokenizers at {path}")
    return path
