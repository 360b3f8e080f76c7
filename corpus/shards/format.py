"""The token shard format and its manifest: the contract between `corpus` (writer) and `pretrain` (reader).

A shard is llm.c's `.bin` layout so that other tools read it unchanged: a header of 256 little-endian int32
(``[0]`` magic, ``[1]`` version, ``[2]`` token count, the rest zero), then the tokens. llm.c's two variants:

* GPT-2 style, vocabulary < 65,536: magic 20240520, version 1, uint16 tokens;
* Llama-3 style, larger vocabularies: magic 20240801, version 7, uint32 tokens.

Every document starts with the tokenizer's BOS id. ``manifest.json`` beside the shards describes the set
(see :class:`Manifest`); its ``tokenizer.sha256`` is what pretraining checks its vocabulary against.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import InputError
from common.fileio import atomic_write_bytes

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
FORMATS = {
    "uint16": {"magic": 20240520, "version": 1, "dtype": np.uint16},
    "uint32": {"magic": 20240801, "version": 7, "dtype": np.uint32},
}
MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


class ShardError(InputError):
    """A shard or manifest that does not match the format; the message names the file."""


class TokenizerMismatch(ShardError):
    """A tokenizer file whose sha256 is not the one the shards (or a model) were made with."""


def dtype_for_vocab(vocab_size: int) -> str:
    """The narrowest shard dtype that holds every id of a vocabulary of ``vocab_size``."""
    return "uint16" if vocab_size <= 2**16 else "uint32"


def encode_shard(tokens: np.ndarray, dtype: str) -> bytes:
    """The bytes of a shard holding ``tokens`` (header + tokens)."""
    fmt = FORMATS[dtype]
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() > np.iinfo(fmt["dtype"]).max):
        raise ShardError(f"token ids out of range for {dtype}: min {tokens.min()}, max {tokens.max()}")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = fmt["magic"], fmt["version"], tokens.size
    return header.tobytes() + tokens.astype(np.dtype(fmt["dtype"]).newbyteorder("<")).tobytes()


def write_shard(path: str | os.PathLike, tokens: np.ndarray, dtype: str) -> None:
    """Write one shard atomically."""
    atomic_write_bytes(path, encode_shard(tokens, dtype))


def read_header(path: str | os.PathLike) -> tuple[str, int]:
    """Validate a shard's header and size; return ``(dtype, token_count)``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
    except FileNotFoundError:
        raise ShardError(f"{path}: shard file is missing") from None
    if len(raw) < HEADER_BYTES:
        raise ShardError(f"{path}: {len(raw)} bytes, shorter than the {HEADER_BYTES}-byte header")
    header = np.frombuffer(raw, dtype="<i4")
    for dtype, fmt in FORMATS.items():
        if header[0] == fmt["magic"]:
            if header[1] != fmt["version"]:
                raise ShardError(f"{path}: version {header[1]} with magic {header[0]}, expected {fmt['version']}")
            count = int(header[2])
            expected = HEADER_BYTES + count * np.dtype(fmt["dtype"]).itemsize
            actual = path.stat().st_size
            if actual != expected:
                raise ShardError(f"{path}: header says {count} tokens ({expected} bytes) but file has {actual} bytes")
            return dtype, count
    raise ShardError(f"{path}: bad magic {header[0]}, expected one of {[f['magic'] for f in FORMATS.values()]}")


def read_shard(path: str | os.PathLike) -> np.ndarray:
    """The shard's tokens as a read-only memory map (no copy)."""
    dtype, count = read_header(path)
    return np.memmap(path, dtype=np.dtype(FORMATS[dtype]["dtype"]).newbyteorder("<"), mode="r",
                     offset=HEADER_BYTES, shape=(count,))


@dataclass
class TokenizerInfo:
    """The tokenizer the shards were made with. ``spec`` is what `fertility.tokenizers.load_tokenizer` takes."""

    spec: str
    sha256: str
    vocab_size: int
    bos_id: int
    eos_id: int | None = None

    def load(self, spec: str | None = None):
        """Load the tokenizer (from ``spec``, default the recorded one) and check that it is this one: the
        project's one fingerprint check. Raises ``TokenizerMismatch`` naming both hashes when the file is
        another tokenizer (overwritten, or the wrong one given), ``fertility.TokenizerLoadError`` when it
        cannot be loaded at all."""
        from fertility.tokenizers import load_tokenizer

        spec = spec or self.spec
        tok = load_tokenizer(spec)
        if tok.fingerprint != self.sha256:
            raise TokenizerMismatch(f"tokenizer {spec!r} has sha256 {tok.fingerprint}, but the shards were made "
                                    f"with {self.spec!r} (sha256 {self.sha256}); it was replaced or is another "
                                    "tokenizer: give the one the shards were made with, or re-tokenize")
        return tok


@dataclass
class ShardInfo:
    """One shard. Train shards mix languages; validation shards hold one language each.

    ``chars`` and ``bytes`` count the cleaned text of the shard's documents (BOS excluded); they are what
    bits per character and bits per byte divide by.
    """

    file: str
    split: str  # "train" or "val"
    tokens: int
    documents: int
    tokens_by_language: dict[str, int]
    language: str | None = None  # set on validation shards
    chars: int = 0
    bytes: int = 0
    sha256: str = ""


_JSON_TYPES = {"str": str, "int": int, "dict": dict, "list": list}


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _record(cls: type, value: Any, path: Path, where: str) -> dict[str, Any]:
    """``value`` (the manifest's field ``where``; "" for the whole file) checked against the fields of dataclass
    ``cls``: an object with every required field, no unknown one, each of a simple type (str, int, dict, list,
    optionally null) of that type. A mismatch is a :class:`ShardError` naming the file, the field and what was
    expected (``[]`` was "'str' object cannot be interpreted as an integer")."""
    if not isinstance(value, dict):
        what = f"field {where!r}" if where else "the manifest"
        raise ShardError(f"{path}: {what} is {_json_kind(value)}, expected a JSON object with the fields "
                         f"{', '.join(f.name for f in fields(cls))}, as `corpus build` writes it")
    prefix = f"{where}." if where else ""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ShardError(f"{path}: unknown field(s) {', '.join(prefix + u for u in unknown)}; expected only "
                         f"{', '.join(prefix + k for k in known)}")
    for name, f in known.items():
        if name not in value:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ShardError(f"{path}: no field '{prefix}{name}' ({f.type}), which is required")
            continue
        kinds = [k.strip().split("[")[0] for k in str(f.type).split("|")]
        types = tuple(_JSON_TYPES[k] for k in kinds if k in _JSON_TYPES)
        got = value[name]
        if got is None and "None" in kinds:
            continue
        if types and (not isinstance(got, types) or isinstance(got, bool)):
            raise ShardError(f"{path}: field '{prefix}{name}' is {_json_kind(got)}, expected {f.type}")
        if f.type == "dict[str, int]":  # tokens per language: summed and compared by every reader
            bad = next((k for k, v in got.items() if not isinstance(v, int) or isinstance(v, bool)), None)
            if bad is not None:
                raise ShardError(f"{path}: field '{prefix}{name}.{bad}' is {_json_kind(got[bad])}, expected int")
    return dict(value)


@dataclass
class Manifest:
    """``manifest.json``: everything needed to read, verify and reproduce a shard set."""

    tokenizer: TokenizerInfo
    dtype: str
    shards: list[ShardInfo]
    seed: int = 0
    sources: list[dict[str, Any]] = field(default_factory=list)
    filters: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def split(self, name: str, language: str | None = None) -> list[ShardInfo]:
        """The shards of one split (and, for validation, one language), in order."""
        return [s for s in self.shards if s.split == name and (language is None or s.language == language)]

    def languages(self) -> list[str]:
        return sorted({lang for s in self.shards for lang in s.tokens_by_language})

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    def save(self, directory: str | os.PathLike) -> None:
        atomic_write_bytes(Path(directory) / MANIFEST_NAME, self.to_json().encode())

    @classmethod
    def load(cls, directory: str | os.PathLike) -> Manifest:
        path = Path(directory) / MANIFEST_NAME
        if not Path(directory).is_dir():
            what = "is not a folder" if Path(directory).exists() else "does not exist"
            raise ShardError(f"{directory}: {what}; expected a shard directory written by `corpus build`")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ShardError(f"{path}: no manifest; is {directory} a shard directory written by `corpus build`?") from None
        except UnicodeDecodeError:
            raise ShardError(f"{path}: not UTF-8 text; expected the JSON manifest `corpus build` writes") from None
        except json.JSONDecodeError as e:
            raise ShardError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None
        record = _record(cls, raw, path, "")
        if record["dtype"] not in FORMATS:
            raise ShardError(f"{path}: field 'dtype' is {record['dtype']!r}, expected one of {sorted(FORMATS)}")
        record["tokenizer"] = TokenizerInfo(**_record(TokenizerInfo, record["tokenizer"], path, "tokenizer"))
        record["shards"] = [ShardInfo(**_record(ShardInfo, s, path, f"shards[{i}]"))
                            for i, s in enumerate(record["shards"])]
        return cls(**record)

    def verify(self, directory: str | os.PathLike) -> None:
        """Check every shard's header, dtype and token count against the manifest; raise ShardError if not."""
        for s in self.shards:
            dtype, count = read_header(Path(directory) / s.file)
            if dtype != self.dtype:
                raise ShardError(f"{s.file}: dtype {dtype}, manifest says {self.dtype}")
            if count != s.tokens:
                raise ShardError(f"{s.file}: {count} tokens, manifest says {s.tokens}")
            if sum(s.tokens_by_language.values()) != s.tokens:
                raise ShardError(f"{s.file}: per-language counts sum to {sum(s.tokens_by_language.values())}, not {s.tokens}")
