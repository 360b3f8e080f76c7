"""``load_tokenizer``: a known name (resolved in a tokenizer folder), a path of any format, or a loaded tokenizer.

``FORMATS`` is the one list of file formats (each a :class:`~fertility.tokenizers.base.Format`, defined in its
adapter's module); detection, folder lookup and the messages read only it. A new format is its adapter module
(the tokenizer class, a loader and its ``Format``) plus one entry here; where it stands in the list decides
which format wins a tie (see ``Format``). ``KNOWN_TOKENIZERS`` is a separate catalogue: names for files laid out
in a tokenizer folder, of any format.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from fertility.tokenizers import hf, sentencepiece, tiktoken
from fertility.tokenizers.base import Format, Tokenizer, TokenizerLoadError

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
# In a folder, the first of these found is taken: tokenizer.json, vocab.json, vocab.txt, tokenizer.model, *.tiktoken.
FORMATS: tuple[Format, ...] = (
    hf.TOKENIZER_JSON,
    hf.VOCAB_MERGES,
    hf.WORDPIECE,
    sentencepiece.SENTENCEPIECE,
    tiktoken.TIKTOKEN,
)



def load_tokenizer(spec: str | Tokenizer, tokenizer_dir: str | Path | None = None) -> Tokenizer:
    """Load a tokenizer from a known name, a path, or pass a :class:`Tokenizer` through.

    A known name (see ``KNOWN_TOKENIZERS``) is looked up in ``tokenizer_dir``, then ``$FERTILITY_TOKENIZER_DIR``,
    then the repository's ``data/tokenizers``. Any other spec is a path: a file of one of ``FORMATS`` (a
    ``tokenizer.json``; a ``vocab.json`` with ``merges.txt`` beside it; a WordPiece ``vocab.txt``; a tiktoken
    ranks file, ``.tiktoken``, ``.tiktoken.gz`` or any name with that content; a sentencepiece model, any name)
    or a folder holding one.
    An unchanged file is loaded once per process and the same object returned: copy it before changing it.
    """
    check_tokenizer_dir(tokenizer_dir)
    if isinstance(spec, Tokenizer):
        return spec
    if spec in KNOWN_TOKENIZERS:
        return _load_cached(_resolve_known(spec, tokenizer_dir), spec, spec)
    path = Path(spec).expanduser()
    try:
        path.stat()
    except FileNotFoundError:
        pass
    except OSError as e:  # a symlink loop, a name too long: not "no such file"
        raise TokenizerLoadError(f"{spec}: cannot be read ({e.strerror or e})") from None
    else:
        return _load_cached(path, _name_for(path), None)
    if os.sep not in spec and "/" not in spec and "." not in Path(spec).name:
        raise TokenizerLoadError(
            f"unknown tokenizer name {spec!r}; known names: {', '.join(KNOWN_TOKENIZERS)} "
            f"(looked in {', '.join(map(str, _search_dirs(tokenizer_dir)))}); otherwise give a path to a file"
        )
    raise TokenizerLoadError(f"{spec}: no such tokenizer file or directory")


def check_tokenizer_dir(tokenizer_dir: str | Path | None) -> None:
    """A :class:`TokenizerLoadError` when a tokenizer folder is given (``--tokenizer-dir``) and is not a folder:
    a mistyped one was ignored, and known names then came from elsewhere without a word."""
    if tokenizer_dir is None:
        return
    path = Path(tokenizer_dir).expanduser()
    if not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        raise TokenizerLoadError(f"--tokenizer-dir {tokenizer_dir}: {what} (expected the folder known "
                                 "tokenizer names are found in)")


def available_known(tokenizer_dir: str | Path | None = None) -> list[str]:
    """The known names whose files are found (in ``tokenizer_dir``, ``$FERTILITY_TOKENIZER_DIR`` or the
    repository's ``data/tokenizers``), in the order of ``KNOWN_TOKENIZERS``; nothing is loaded."""
    check_tokenizer_dir(tokenizer_dir)
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
    generic = set().union(*(f.generic_names() for f in FORMATS))
    return path.parent.name if path.name in generic and path.parent.name else path.name


def format_of(path: Path) -> Format:
    """The format of the file ``path``, claimed as :class:`~fertility.tokenizers.base.Format` says."""
    lower = path.name.lower()
    for claims in (lambda f: lower in f.names, lambda f: lower.endswith(f.suffixes),
                   lambda f: f.sniff is not None and f.sniff(path), lambda f: f.any_file):
        for fmt in FORMATS:
            if claims(fmt):
                return fmt
    raise TokenizerLoadError(f"{path}: not a file of a known tokenizer format ({_one_of(f.what for f in FORMATS)})")


def tokenizer_file_in(folder: Path) -> Path:
    """The tokenizer file a folder holds: the first match of the formats' ``in_folder`` patterns, in order."""
    for fmt in FORMATS:
        for pattern in fmt.in_folder:
            found = sorted(p for p in folder.glob(pattern) if p.exists())
            if found:
                return found[0]
    raise TokenizerLoadError(f"{folder}: no tokenizer file found (expected {_one_of(f.layout for f in FORMATS)})")


def _one_of(items) -> str:
    *rest, last = items
    return f"{', '.join(rest)} or {last}" if rest else last


def _load_path(path: Path, name: str, preset: str | None = None) -> Tokenizer:
    if path.is_dir():
        return _load_path(tokenizer_file_in(path), name, preset)
    fmt = format_of(path)
    try:
        return fmt.load(path, name, preset)
    except TokenizerLoadError:
        raise
    except Exception as e:  # tokenizers/tiktoken raise bare Exception subclasses for unreadable files
        raise TokenizerLoadError(f"{path}: not a valid {fmt.what} ({type(e).__name__}: {e})") from None
