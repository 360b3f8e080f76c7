"""A Hugging Face cache in a temporary HF_HOME, offline, holding small tokenizers built here (no network, no
../shared)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

SPECIALS = ["<|endoftext|>", "<|bos|>"]
LINES = ["আমি বাংলায় গান গাই।", "I sing in Bengali.", "বাংলা লেখা, English text, and numbers 12345."] * 20


def small_tokenizer_json(vocab_size: int = 300) -> str:
    """A byte-level BPE's tokenizer.json, trained in milliseconds, with ``SPECIALS`` as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(LINES, trainer)
    return tok.to_str()


@dataclass
class HubCache:
    """The temporary cache: ``add`` puts a repository's files in it as huggingface_hub lays them out."""

    hub: Path

    def add(self, repo: str, files: dict[str, str], commit: str = "0" * 40) -> Path:
        """``models--org--name/blobs/<sha256>``, ``snapshots/<commit>/<file>`` (a relative symlink to the blob)
        and ``refs/main``: the snapshot folder."""
        root = self.hub / f"models--{repo.replace('/', '--')}"
        snapshot = root / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (root / "blobs").mkdir(exist_ok=True)
        for name, content in files.items():
            data = content.encode()
            blob = root / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(commit)
        return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> HubCache:
    """An empty, offline Hugging Face cache in ``tmp_path/hf``. huggingface_hub reads HF_HOME and HF_HUB_OFFLINE
    when it is imported, so its constants are patched too: nothing here can reach the network."""
    constants = pytest.importorskip("huggingface_hub.constants")
    home = tmp_path / "hf"
    (home / "hub").mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return HubCache(home / "hub")
