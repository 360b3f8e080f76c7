"""``load_tokenizer``: a known name (resolved in a tokenizer folder), a path of any format, a Hugging Face Hub id
(through huggingface_hub's cache), ``NAME=SPEC`` (any of these under the name NAME), or a loaded tokenizer.

``FORMATS`` is the one list of file formats (each a :class:`~fertility.tokenizers.base.Format`, defined in its
adapter's module); detection, folder lookup and the messages read only it. A new format is its adapter module
(the tokenizer class, a loader and its ``Format``) plus one entry here; where it stands in the list decides
which format wins a tie (see ``Format``). ``KNOWN_TOKENIZERS`` is a separate catalogue: names for files laid out
in a tokenizer folder, of any format.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import re
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
# What a Hub repository is asked for: its tokenizer.json first, else every format's files (tokenizer_file_in picks).
_HUB_FILE = hf.TOKENIZER_JSON.in_folder[0]
_HUB_PATTERNS = tuple(dict.fromkeys(p for f in FORMATS for p in (*f.in_folder, *f.companions)))
# a spec ending so is a file path, never a Hub id ("data/tok.json" that does not exist)
_FILE_SUFFIXES = tuple(dict.fromkeys(s for f in FORMATS for s in f.suffixes)) + (".model", ".gz")


def load_tokenizer(spec: str | Tokenizer, tokenizer_dir: str | Path | None = None) -> Tokenizer:
    """Load a tokenizer from a known name, a path, a Hugging Face Hub id, ``NAME=SPEC``, or pass a
    :class:`Tokenizer` through.

    A spec that is an existing path is that path, whatever else it looks like. ``NAME=SPEC`` (NAME a plain label:
    no ``/``, ``\\`` or ``=``) loads SPEC and names it NAME in every output. A known name (see
    ``KNOWN_TOKENIZERS``) is looked up in ``tokenizer_dir``, then ``$FERTILITY_TOKENIZER_DIR``, then the
    repository's ``data/tokenizers``. A path is a file of one of ``FORMATS`` (a ``tokenizer.json``; a ``vocab.json``
    with ``merges.txt`` beside it; a WordPiece ``vocab.txt``; a tiktoken ranks file, ``.tiktoken``, ``.tiktoken.gz``
    or any name with that content; a sentencepiece model, any name) or a folder holding one. ``org/name`` or
    ``org/name@revision`` that is no path is a Hub repository, its tokenizer file taken from the Hugging Face cache
    (downloaded there first unless ``HF_HUB_OFFLINE=1``), as ``transformers`` does; its name is the id.
    The loaded tokenizer's ``spec`` loads it again, under the same name, from any working folder.
    An unchanged file is loaded once per process and the same object returned: copy it before changing it.
    """
    check_tokenizer_dir(tokenizer_dir)
    if isinstance(spec, Tokenizer):
        return spec
    label, target = split_label(spec)
    tok, source = _load_unlabelled(target, tokenizer_dir)
    if label is None or label == tok.name:
        return tok
    named = copy.copy(tok)  # the cached object keeps its own name
    named.name, named.spec = label, f"{label}={source}"
    return named


def check_distinct_names(names: list[str], note: str = "") -> None:
    """A :class:`TokenizerLoadError` when two tokenizers of one command share a name: every output keys them by
    name, so the second would overwrite the first. ``note`` says where a name came from, when not from the spec."""
    if len(set(names)) != len(names):
        raise TokenizerLoadError(f"two tokenizers share a name: {', '.join(names)}{note}; give each once, or name "
                                 "one with NAME=SPEC")


def split_label(spec: str) -> tuple[str | None, str]:
    """``(NAME, SPEC)`` of ``NAME=SPEC``, or ``(None, spec)``: a spec that is an existing path, or whose part
    before the first ``=`` is not a plain label (empty, ``.``/``..``, or holding ``/`` or ``\\``), has no label.
    Unrelated to the ``LANG=PATH`` of text options: a label here is a tokenizer's name."""
    name, sep, target = spec.partition("=")
    if not sep or not target or _LABEL.fullmatch(name) is None or name in (".", "..") or _exists(spec):
        return None, spec
    return name, target


# A tokenizer's label: printable, no path separator, no "=" (what NAME=SPEC splits on), not starting with "~".
_LABEL = re.compile(r"[^\s/\\=~][^/\\=]*")
# owner/name[@revision], as the Hub spells repository ids; "--" and ".." are refused by it, and here.
_HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[^\s@]+))?")


def _exists(spec: str) -> bool:
    try:
        Path(spec).expanduser().stat()
    except FileNotFoundError:
        return False
    except OSError as e:  # a symlink loop, a name too long: not "no such file"
        raise TokenizerLoadError(f"{spec}: cannot be read ({e.strerror or e})") from None
    return True


def _load_unlabelled(spec: str, tokenizer_dir: str | Path | None) -> tuple[Tokenizer, str]:
    """The tokenizer ``spec`` names, and what loads the same file again from anywhere (an absolute path, a Hub id)."""
    if spec in KNOWN_TOKENIZERS:
        # recorded as its file (pretrain and corpus inspect take no --tokenizer-dir), named as it was asked
        path = _absolute(_resolve_known(spec, tokenizer_dir))
        spec_again = str(path) if _name_for(path) == spec else f"{spec}={path}"
        return _load_cached(path, spec, spec, spec_again), str(path)
    if _exists(spec):
        path = _absolute(Path(spec).expanduser())
        return _load_cached(path, _name_for(path), None, str(path)), str(path)
    hub = _hub_id(spec)
    if hub is not None:
        return _load_hub(spec, *hub), spec
    if os.sep not in spec and "/" not in spec and "." not in Path(spec).name:
        raise TokenizerLoadError(
            f"unknown tokenizer name {spec!r}; known names: {', '.join(KNOWN_TOKENIZERS)} "
            f"(looked in {', '.join(map(str, _search_dirs(tokenizer_dir)))}); otherwise give a path to a file, "
            "a Hugging Face Hub id (org/name) or NAME=SPEC"
        )
    raise TokenizerLoadError(f"{spec}: no such tokenizer file or directory")


def _absolute(path: Path) -> Path:
    # Not resolve(): a Hugging Face cache file is a symlink to a blob named by its hash, and a tokenizer's format
    # (and vocab.json's merges.txt beside it) is found from the name it is given.
    return Path(os.path.abspath(path))


def _hub_id(spec: str) -> tuple[str, str | None] | None:
    """``(repo, revision)`` when ``spec`` reads as a Hub repository id, not as a file path (a name ending in a
    tokenizer file's suffix, or any path with more than one folder, is a path that does not exist)."""
    match = _HUB_ID.fullmatch(spec)
    if match is None or "--" in match["repo"] or ".." in match["repo"]:
        return None
    if match["repo"].lower().endswith(_FILE_SUFFIXES):
        return None
    return match["repo"], match["revision"]


def _load_hub(spec: str, repo: str, revision: str | None) -> Tokenizer:
    """The tokenizer of Hub repository ``repo``: its tokenizer.json, else the first file ``FORMATS`` finds in the
    repository's snapshot (only the formats' files are fetched), from the Hugging Face cache."""
    from huggingface_hub import constants, hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f" at revision {revision!r}" if revision else ""
    offline = bool(constants.HF_HUB_OFFLINE)
    not_cached = (f"{spec}: no such local path, and the Hugging Face Hub repository {repo}{at} has no tokenizer file "
                  f"in the Hugging Face cache ({constants.HF_HUB_CACHE}) "
                  + ("and HF_HUB_OFFLINE=1" if offline else "and the Hub could not be reached")
                  + f": download it once, online, with `hf download {repo} {_HUB_FILE}"
                  + (f" --revision {revision}" if revision else "")
                  + "` (tokenizer.model for a sentencepiece-only repository), or give a local path")
    # The hub logs each retry of an unreachable server as a warning of its own; the one line below says it all.
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        try:
            found = Path(hf_hub_download(repo, _HUB_FILE, revision=revision))
        except EntryNotFoundError:  # not in the repository, or (offline) not in the cache: any other format's file
            found = Path(snapshot_download(repo, revision=revision, allow_patterns=list(_HUB_PATTERNS)))
            try:
                tokenizer_file_in(found)
            except TokenizerLoadError:
                raise TokenizerLoadError(not_cached if offline else (
                    f"{spec}: the Hugging Face Hub repository {repo}{at} holds no tokenizer file "
                    f"(expected {_one_of(f.layout for f in FORMATS)})")) from None
    except GatedRepoError:
        raise TokenizerLoadError(f"{spec}: the Hugging Face Hub repository {repo} is gated: accept its terms on its "
                                 "page and log in (`hf auth login`), or give a local path") from None
    except RepositoryNotFoundError:
        raise TokenizerLoadError(f"{spec}: no such local path, and no Hugging Face Hub repository {repo} (or it is "
                                 "private: log in with `hf auth login`)") from None
    except RevisionNotFoundError:
        raise TokenizerLoadError(f"{spec}: the Hugging Face Hub repository {repo} has no revision {revision!r}") from None
    except (EntryNotFoundError, OfflineModeIsEnabled):
        raise TokenizerLoadError(not_cached) from None
    except HFValidationError as e:
        raise TokenizerLoadError(f"{spec}: no such local path, nor a valid Hugging Face Hub id ({e})") from None
    except HfHubHTTPError as e:
        raise TokenizerLoadError(f"{spec}: the Hugging Face Hub refused {repo}{at} ({str(e).splitlines()[0]})") from None
    finally:
        hub_log.setLevel(level)
    return _load_cached(found, spec, None, spec)


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


def _load_cached(path: Path, name: str, preset: str | None, spec: str) -> Tokenizer:
    # Loading a large vocabulary takes seconds; files that have not changed are loaded once per process. For a
    # folder the key holds every file in it: a folder's own mtime does not change when a file in it is rewritten,
    # and a cached tokenizer would then carry the old file's fingerprint.
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    key = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _load_path_cached(str(_absolute(path)), name, preset, spec, key)


@functools.lru_cache(maxsize=16)
def _load_path_cached(path: str, name: str, preset: str | None, spec: str, key: tuple) -> Tokenizer:
    tok = _load_path(Path(path), name, preset)
    tok.spec = spec
    return tok


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
