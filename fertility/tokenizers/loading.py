"""``load_tokenizer``: a known name (resolved in a tokenizer folder), a path of any format, or a loaded tokenizer."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from fertility.tokenizers.base import (
    Tokenizer,
    TokenizerLoadError,
)
from fertility.tokenizers.hf import HFTokenizer, _gpt2_style, _wordpiece
from fertility.tokenizers.sentencepiece import SentencePieceTokenizer
from fertility.tokenizers.tiktoken import TiktokenTokenizer

SHIPPED_TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "data" / "tokenizers"
TOKENIZER_DIR_ENV = "FERTILITY_TOKENIZER_DIR"

# Known names -> file layout relative to a tokenizer directory (as in ../shared/tokenizers/README.md).
# A directory holds vocab.json + merges.txt; a ``.tiktoken`` file may also be stored as ``.tiktoken.gz``.
KNOWN_TOKENIZERS: dict[str, str] = {
    "gpt2": "gpt2",
    "cl100k_base": "cl100k_base/cl100k_base.tiktoken",
    "o200k_base": "o200k_base/o200k_base.tiktoken",
    "llama3": "llama3/tokenizer.model",
    "llama4": "llama4/tokenizer.model",
    "qwen2.5": "qwen2.5",
    "gemma": "gemma/tokenizer.gemma",
    "gemma3": "gemma3/tokenizer.gemma3",
    "llama2": "llama2/tokenizer.llama2",
    "mistral-v1": "mistral/tokenizer.model.v1",
    "mistral-v3": "mistral/mistral_instruct_tokenizer_240323.model.v3",
    "anthropic-claude-legacy": "anthropic-claude-legacy/tokenizer.json",
    "bangla-bert-base": "bangla-bert-base/vocab.txt",
    "bnlp-bn-spm": "bnlp-bn-spm/bn_spm.model",
}
_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/=]+ \d+\s*$")



def load_tokenizer(spec: str | Tokenizer, tokenizer_dir: str | Path | None = None) -> Tokenizer:
    """Load a tokenizer from a known name, a path, or pass a :class:`Tokenizer` through.

    A known name (see ``KNOWN_TOKENIZERS``) is looked up in ``tokenizer_dir``, then ``$FERTILITY_TOKENIZER_DIR``,
    then the repository's ``data/tokenizers``. Any other spec is a path: a ``tokenizer.json``; a ``vocab.json``
    (with ``merges.txt`` beside it) or a folder holding both; a WordPiece ``vocab.txt``; a tiktoken ranks file
    (``.tiktoken``, ``.tiktoken.gz``, or any name with that content); a sentencepiece model (any name).
    An unchanged file is loaded once per process and the same object returned: copy it before changing it.
    """
    if isinstance(spec, Tokenizer):
        return spec
    if spec in KNOWN_TOKENIZERS:
        return _load_cached(_resolve_known(spec, tokenizer_dir), spec, spec)
    path = Path(spec).expanduser()
    if path.exists():
        return _load_cached(path, _name_for(path), None)
    if os.sep not in spec and "/" not in spec and "." not in Path(spec).name:
        raise TokenizerLoadError(
            f"unknown tokenizer name {spec!r}; known names: {', '.join(KNOWN_TOKENIZERS)} "
            f"(looked in {', '.join(map(str, _search_dirs(tokenizer_dir)))}); otherwise give a path to a file"
        )
    raise TokenizerLoadError(f"{spec}: no such tokenizer file or directory")


def available_known(tokenizer_dir: str | Path | None = None) -> list[str]:
    """The known names whose files are found (in ``tokenizer_dir``, ``$FERTILITY_TOKENIZER_DIR`` or the
    repository's ``data/tokenizers``), in the order of ``KNOWN_TOKENIZERS``; nothing is loaded."""
    found = []
    for name in KNOWN_TOKENIZERS:
        try:
            _resolve_known(name, tokenizer_dir)
        except TokenizerLoadError:
            continue
        found.append(name)
    return found


def _load_cached(path: Path, name: str, preset: str | None) -> Tokenizer:
    # Loading a large vocabulary takes seconds; files that have not changed are loaded once per process. For a
    # folder the key holds every file in it: a folder's own mtime does not change when a file in it is rewritten,
    # and a cached tokenizer would then carry the old file's fingerprint.
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    key = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _load_path_cached(str(path.resolve()), name, preset, key)


@functools.lru_cache(maxsize=16)
def _load_path_cached(path: str, name: str, preset: str | None, key: tuple) -> Tokenizer:
    return _load_path(Path(path), name, preset)


def _search_dirs(tokenizer_dir: str | Path | None) -> list[Path]:
    dirs = [Path(tokenizer_dir)] if tokenizer_dir else []
    if os.environ.get(TOKENIZER_DIR_ENV):
        dirs.append(Path(os.environ[TOKENIZER_DIR_ENV]))
    dirs.append(SHIPPED_TOKENIZER_DIR)
    return dirs


def _resolve_known(name: str, tokenizer_dir: str | Path | None) -> Path:
    rel = KNOWN_TOKENIZERS[name]
    tried = []
    for base in _search_dirs(tokenizer_dir):
        for candidate in (base / rel, base / (rel + ".gz")):
            tried.append(str(candidate))
            if candidate.exists():
                return candidate
    raise TokenizerLoadError(
        f"tokenizer {name!r} not found; looked for {' , '.join(tried)}. "
        f"Pass --tokenizer-dir DIR (or set {TOKENIZER_DIR_ENV}) to a folder laid out as {rel}"
    )


def _name_for(path: Path) -> str:
    generic = {"tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt"}
    return path.parent.name if path.name in generic and path.parent.name else path.name


def _load_path(path: Path, name: str, preset: str | None = None) -> Tokenizer:
    if path.is_dir():
        for candidate in ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model"):
            if (path / candidate).exists():
                return _load_path(path / candidate, name, preset)
        tiktoken_files = sorted(path.glob("*.tiktoken")) + sorted(path.glob("*.tiktoken.gz"))
        if tiktoken_files:
            return _load_path(tiktoken_files[0], name, preset)
        raise TokenizerLoadError(
            f"{path}: no tokenizer file found (expected tokenizer.json, vocab.json + merges.txt, vocab.txt, "
            "tokenizer.model or *.tiktoken)"
        )
    lower = path.name.lower()
    if lower == "vocab.json":
        merges = path.with_name("merges.txt")
        if not merges.exists():
            raise TokenizerLoadError(f"{path}: expected merges.txt beside it for a GPT-2 style BPE")
        return _guarded(path, "GPT-2 style vocab.json + merges.txt", lambda: _gpt2_style(path, merges, name))
    if lower.endswith(".json"):
        return _guarded(path, "HF tokenizer.json", lambda: _hf_json(path, name))
    if lower.endswith(".txt"):
        return _guarded(path, "WordPiece vocab.txt", lambda: _wordpiece(path, name))
    if lower.endswith((".tiktoken", ".tiktoken.gz")) or _looks_like_tiktoken(path):
        return _guarded(path, "tiktoken ranks file", lambda: TiktokenTokenizer(path, name, preset))
    return SentencePieceTokenizer(path, name)


def _hf_json(path: Path, name: str) -> HFTokenizer:
    from tokenizers import Tokenizer as HFTok

    return HFTokenizer(HFTok.from_file(str(path)), name, "hf", [path])


def _guarded(path: Path, what: str, load) -> Tokenizer:
    try:
        return load()
    except TokenizerLoadError:
        raise
    except Exception as e:  # tokenizers/tiktoken raise bare Exception subclasses for unreadable files
        raise TokenizerLoadError(f"{path}: not a valid {what} ({type(e).__name__}: {e})") from None


def _looks_like_tiktoken(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:2] == b"\x1f\x8b":
        return True
    first = head.split(b"\n", 1)[0]
    return bool(_TIKTOKEN_LINE.match(first))
