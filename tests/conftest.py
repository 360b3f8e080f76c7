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


# --- the command-line contract (docs/contract.md), shared by every package's tests/*/test_contract.py -----------

class UserFiles:
    """Files of the user's beside a command's inputs and OUT: whatever the command does with bad input, they
    stay byte for byte as they were (:meth:`unchanged`)."""

    def __init__(self, *folders: Path) -> None:
        self.files = {}
        for i, folder in enumerate(folders):
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"KEEP-{i}.txt"
            path.write_text(f"the user's own file {i}\n", encoding="utf-8")
            self.files[path] = path.read_bytes()

    def unchanged(self) -> bool:
        return all(p.is_file() and p.read_bytes() == content for p, content in self.files.items())


@pytest.fixture
def user_files():
    """``user_files(folder, ...)``: plant a file of the user's in each folder; ``.unchanged()`` checks them."""
    return UserFiles


def assert_input_error(code: int, stderr: str, *names: str, exit_code: int = 2) -> None:
    """The contract for bad input: exit 2, stderr exactly one line, no traceback, naming each of ``names``
    (the file, option or field at fault)."""
    lines = stderr.splitlines()
    assert code == exit_code, (code, stderr)
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.fixture
def input_error():
    """:func:`assert_input_error` as a fixture."""
    return assert_input_error
