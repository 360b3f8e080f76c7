"""Labelled text sources, streamed one document at a time with bounded memory.

A source is a path or a hub dataset, labelled with a language:

* ``.txt`` / ``.txt.gz``: one document per line; blank lines are skipped; ``Document.line`` is the physical line.
* ``.jsonl`` / ``.jsonl.gz``: one JSON object per line; the document is its ``field`` (default ``text``).
* ``.parquet``: the column ``field``; ``Document.line`` is the 1-based row.
* a folder written by ``datasets.Dataset.save_to_disk`` (a ``DatasetDict`` folder uses ``split``).
* ``hf:NAME``: ``datasets.load_dataset(NAME, config, split=split, streaming=True)``. NAME may also be a local
  folder of data files laid out like a hub repository, which is how it is tested offline.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from common.cli import check_label
from common.errors import InputError

HF_PREFIX = "hf:"
_TEXT_SUFFIXES = (".txt", ".txt.gz")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")
_PARQUET_SUFFIXES = (".parquet",)
_BATCH_ROWS = 1024
# The most bytes of one line held at once; a longer line is read as several documents (see _line_pieces).
PIECE_BYTES = 1 << 20
HUB_CHECK_S = 5  # seconds to wait for the hub's address before calling it unreachable
MAX_RECORD_BYTES = 64 << 20  # a JSONL record is parsed whole; a longer line is refused, not read into memory


class TextError(InputError):
    """Unreadable text input; the message names the file (and line where it applies) and what was expected."""


class BadUTF8Error(TextError):
    """A line that is not UTF-8 (``errors="strict"``). The message names no way out: only a command that has a
    flag to skip such lines can name it, with :meth:`with_hint` (``fertility report --skip-bad-utf8``)."""

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = message
        super().__init__(f"{message} ({hint})" if hint else message)

    def with_hint(self, hint: str) -> BadUTF8Error:
        return BadUTF8Error(self.message, hint)


@dataclass(frozen=True)
class TextSource:
    """Where a language's text comes from; ``field`` is the JSONL field / parquet or dataset column."""

    lang: str
    spec: str
    field: str = "text"
    config: str | None = None
    split: str = "train"


@dataclass(frozen=True)
class Document:
    """One document; ``line`` is its 1-based line (text, JSONL) or row (parquet, datasets) in ``source``."""

    text: str
    source: str
    line: int


def parse_text_arg(arg: str, option: str = "--text") -> TextSource:
    """Parse a CLI text argument (of ``option``, which errors name) into a :class:`TextSource`.

    Grammar::

        LANG=PATH                 .txt / .txt.gz / .jsonl / .parquet / a save_to_disk folder (field "text")
        LANG=PATH:FIELD           the JSONL field, parquet or dataset column FIELD
        LANG=hf:NAME[:CONFIG[:SPLIT[:FIELD]]]   a hub dataset, streamed (split "train", field "text")

    A PATH that exists as given is taken whole even if it contains a colon. LANG is a label
    (:func:`common.cli.check_label`): it names the language in reports and files, so it is never a path.
    """
    lang, sep, rest = arg.partition("=")
    lang = lang.strip()
    if not sep or not lang or not rest:
        raise TextError(f"{option} {arg}: expected LANG=PATH, LANG=PATH:FIELD or LANG=hf:NAME[:CONFIG]")
    check_label(lang, f"{option} {arg}: language label")
    return source_from_spec(rest, lang)


def source_from_spec(spec: str, lang: str = "") -> TextSource:
    """A :class:`TextSource` for ``spec`` (the part of a text argument after ``LANG=``)."""
    if spec.startswith(HF_PREFIX):
        name, config, split, field = (spec[len(HF_PREFIX):].split(":") + [None, None, None])[:4]
        if not name:
            raise TextError(f"text spec {spec!r}: expected hf:NAME[:CONFIG[:SPLIT[:FIELD]]]")
        return TextSource(lang, HF_PREFIX + name, field or "text", config or None, split or "train")
    if ":" in spec and not Path(spec).exists():
        path, _, field = spec.rpartition(":")
        if path and field and "/" not in field:
            if path.lower().endswith(_TEXT_SUFFIXES):
                raise TextError(f"text spec {spec!r}: a .txt file has no fields (each line is a document); "
                                f"drop ':{field}', or give a .jsonl or .parquet file")
            return TextSource(lang, path, field)
    return TextSource(lang, spec)


def input_paths(sources: Iterable[TextSource | str]) -> list[str]:
    """The paths on disk among ``sources`` (sources, tokenizer specs, folders): what an output folder must keep
    apart from (``common.outdir.check_output_dir(inputs=...)``). A hub dataset counts by its NAME when that is
    a local folder; names that are not on disk (``gpt2``, a hub id) are left out, so they never clash with OUT."""
    paths = []
    for source in sources:
        spec = source.spec if isinstance(source, TextSource) else source
        spec = spec.removeprefix(HF_PREFIX)
        if Path(spec).exists():
            paths.append(spec)
    return paths


def iter_documents(
    source: TextSource | str,
    *,
    max_chars: int | None = None,
    errors: str = "strict",
    counters: dict | None = None,
) -> Iterator[Document]:
    """Stream the documents of ``source`` (a :class:`TextSource` or a spec string such as ``data.jsonl:body``).

    ``max_chars`` keeps whole documents, in file order, until at least that many characters have been
    yielded: a deterministic sample (the head of the source). ``errors="strict"`` raises :class:`BadUTF8Error`
    on a line that is not UTF-8; ``errors="skip"`` skips it and counts it in ``counters["bad_utf8"]``.
    ``counters`` (when given) also receives ``documents`` and ``chars``. A text line, JSONL record or parquet
    (dataset) cell of ``PIECE_BYTES`` or more comes as several documents (cut at whitespace, :func:`cut_pieces`)
    with the same ``line``. A missing, empty or truncated
    source, a bad JSON line or a missing field raises :class:`TextError` naming the file and line.
    """
    if errors not in ("strict", "skip"):
        raise ValueError(f"errors must be 'strict' or 'skip', not {errors!r}")
    if isinstance(source, str):
        source = source_from_spec(source)
    counters = counters if counters is not None else {}
    for key in ("bad_utf8", "documents", "chars"):
        counters.setdefault(key, 0)
    chars = 0
    found = False
    for doc in _raw_documents(source, errors, counters):
        found = True
        if max_chars is not None and len(doc.text) > max_chars:  # a document longer than the whole cap
            doc = Document(cut_head(doc.text, max_chars - chars), doc.source, doc.line)
        counters["documents"] += 1
        counters["chars"] += len(doc.text)
        yield doc
        chars += len(doc.text)
        if max_chars is not None and chars >= max_chars:
            return
    if not found:
        raise TextError(f"{source.spec}: no documents (empty file, or every line blank or skipped)")


def cut_head(text: str, n: int) -> str:
    """The first ``n`` characters of ``text``, cut after the last whitespace in their second half if there is
    one (as a long line's pieces are, :func:`_cut_point`)."""
    head = text[:n]
    space = max(head.rfind(c, n // 2) for c in " \t\r\f\v")
    return head[:space + 1] if space >= 0 else head


def check_distinct(sources: Iterable[TextSource]) -> None:
    """A :class:`TextError` when one file (or dataset) is given twice for one language: its text would count
    twice, with no note. The same file under two labels is two measurements, as asked."""
    seen: dict[tuple, TextSource] = {}
    for source in sources:
        spec = source.spec
        try:
            st = os.stat(spec)
            where: tuple = (st.st_dev, st.st_ino)  # a link or another spelling of the same file is the same
        except OSError:
            where = (spec,)
        key = (source.lang, where, source.field, source.config, source.split)
        if key in seen:
            raise TextError(f"{source.lang}={spec}: the same text as {source.lang}={seen[key].spec}, given twice "
                            "for one language (it would count twice); give each file once")
        seen[key] = source


def check_source(source: TextSource, *, errors: str = "strict") -> None:
    """Fail now, before any work, on a source that cannot be read: missing, empty, no such field or column,
    not UTF-8 up to its first document (the rest is checked as it is streamed)."""
    docs = iter_documents(source, errors=errors)
    try:
        next(docs)
    finally:
        docs.close()


def _raw_documents(source: TextSource, errors: str, counters: dict) -> Iterator[Document]:
    spec = source.spec
    if spec.startswith(HF_PREFIX):
        yield from _hub_documents(source)
        return
    path = Path(spec)
    try:
        path.stat()
    except FileNotFoundError:
        raise TextError(f"{spec}: no such file or directory (expected a text, JSONL or parquet file)") from None
    except OSError as e:  # a symlink loop, a name too long, a folder without permission: say which
        raise TextError(f"{spec}: cannot be read ({e.strerror or e}); expected a text, JSONL or parquet file") from None
    name = path.name.lower()
    if path.is_dir():
        yield from _disk_dataset_documents(source, path)
    elif name.endswith(_PARQUET_SUFFIXES):
        yield from _parquet_documents(source, path)
    elif name.endswith(_JSONL_SUFFIXES):
        field = source.field
        for text, line in _decoded_lines(path, errors, counters, parse=lambda t, n: _json_field(t, field, path, n)):
            for piece in cut_pieces(text):
                yield Document(piece, str(path), line)
    else:
        for text, line in _decoded_lines(path, errors, counters):
            yield Document(text, str(path), line)


def _decoded_lines(path: Path, errors: str, counters: dict,
                   parse: Callable[[str, int], str] | None = None) -> Iterator[tuple[str, int]]:
    """Non-blank lines of a (possibly gzipped) UTF-8 file, without their line ends, with 1-based numbers.

    A line longer than ``PIECE_BYTES`` comes as several pieces with the same number (see :func:`_line_pieces`),
    so memory stays bounded on a file with no newline at all. With ``parse`` (JSONL) each line is read whole
    and what ``parse(line, number)`` returns comes instead of it; the line is let go first, so that a long
    record is held once, as its parsed text, while that is cut (:func:`cut_pieces`).
    """
    with _open_binary(path) as f:
        line_no = 0
        skipping = 0  # the line number whose earlier piece was not UTF-8 (errors="skip" drops the whole rest)
        try:
            for raw, line_no, col in _line_pieces(f, path, whole_lines=parse is not None):
                if skipping == line_no:
                    continue
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    if errors == "skip":
                        counters["bad_utf8"] += 1
                        skipping = line_no
                        continue
                    column = col + len(raw[:e.start].decode("utf-8")) + 1
                    raise BadUTF8Error(f"{path}:{line_no}: not valid UTF-8 (byte {raw[e.start]:#04x} at character "
                                       f"{column}); expected UTF-8 text") from None
                raw = None  # a long record's bytes are not kept beside its text
                if line_no == 1 and col == 0:
                    text = text.removeprefix("\ufeff")
                text = text.rstrip("\r\n")
                if text.strip():
                    if parse is not None:
                        text = parse(text, line_no)
                    yield text, line_no
                text = None
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
            raise TextError(
                f"{path}:{line_no + 1}: the gzip stream is truncated or corrupt ({e}); expected a complete .gz file"
            ) from None


def _line_pieces(f, path: Path, whole_lines: bool) -> Iterator[tuple[bytes, int, int]]:
    """``(bytes, line number, characters of that line before these bytes)`` for each line of a binary file.

    A line of at most ``PIECE_BYTES`` comes whole. A longer one is read ``PIECE_BYTES`` at a time and cut as
    :func:`_pieces` cuts, so a piece is at most twice ``PIECE_BYTES``. With ``whole_lines`` (JSONL: a record
    is parsed whole, and its text is then cut by :func:`cut_pieces`) a longer line comes whole too, and one
    over ``MAX_RECORD_BYTES`` is a :class:`TextError` instead.
    """
    line_no = 1
    while raw := f.readline(PIECE_BYTES):
        # readline stops short of PIECE_BYTES without a newline only at the end: the file's last line is whole
        if _line_ends(raw):
            yield raw, line_no, 0
        elif whole_lines:
            yield _whole_line(f, raw, path, line_no), line_no, 0  # not kept here while the reader holds it
        else:
            col = 0
            for piece in _pieces(chain([raw], iter(lambda: f.readline(PIECE_BYTES), b"")), _line_ends):
                yield piece, line_no, col
                col += len(piece.decode("utf-8", errors="replace"))  # only for the error message's column
        raw = None
        line_no += 1


def _whole_line(f, head: bytes, path: Path, line_no: int) -> bytes:
    """The line that starts with ``head``, read to its end; one over ``MAX_RECORD_BYTES`` is refused."""
    rest = f.readline(MAX_RECORD_BYTES + 1 - len(head))
    if len(head) + len(rest) > MAX_RECORD_BYTES and not rest.endswith(b"\n"):
        raise TextError(f"{path}:{line_no}: a line longer than {MAX_RECORD_BYTES:,} bytes; expected one "
                        "JSON record per line (use a .txt file for one long text)")
    return head + rest


def _line_ends(raw: bytes) -> bool:
    return raw.endswith(b"\n") or len(raw) < PIECE_BYTES


def _pieces(chunks: Iterable[bytes], last: Callable[[bytes], bool]) -> Iterator[bytes]:
    """The pieces of one long line (or text), given as consecutive ``chunks`` of at most ``PIECE_BYTES`` of it,
    where ``last(chunk)`` says a chunk ends it (or the chunks end). After each chunk but the last, what is held
    is cut where a reader would: after the last whitespace byte in its second half, else before its last
    character start (never inside a UTF-8 sequence); so a piece is at most twice ``PIECE_BYTES``, and a word is
    cut only when the text has no whitespace for half a piece. The one rule for plain lines, JSONL records and
    parquet cells (:func:`cut_pieces`)."""
    held = b""
    for chunk in chunks:
        held += chunk
        if last(chunk):
            break
        cut = _cut_point(held)
        piece, held = held[:cut], held[cut:]
        yield piece
    if held:
        yield held


def cut_pieces(text: str) -> Iterator[str]:
    """``text`` whole when it is less than ``PIECE_BYTES`` of UTF-8, else the pieces the same text as one plain
    line would be read as (:func:`_pieces`), less any that are only whitespace: how a JSONL record's or a
    parquet (or dataset) cell's text longer than that becomes several documents, in order, so that no reader
    holds more of one document than a plain line gives it. Nothing else is dropped or changed."""
    if 4 * len(text) < PIECE_BYTES or (len(text) < PIECE_BYTES and len(text.encode("utf-8")) < PIECE_BYTES):
        yield text
        return
    for piece in _pieces(_utf8_chunks(text), lambda chunk: len(chunk) < PIECE_BYTES):
        piece = piece.decode("utf-8")
        if piece.strip():
            yield piece


def _utf8_chunks(text: str) -> Iterator[bytes]:
    """The UTF-8 of ``text`` in chunks of exactly ``PIECE_BYTES`` (the last shorter), encoded a few
    characters at a time so that the whole encoding is never held."""
    buf = bytearray()
    step = max(1, PIECE_BYTES // 4)
    for start in range(0, len(text), step):
        buf += text[start:start + step].encode("utf-8")
        while len(buf) >= PIECE_BYTES:
            yield bytes(buf[:PIECE_BYTES])
            del buf[:PIECE_BYTES]
    if buf:
        yield bytes(buf)


def _cut_point(data: bytes) -> int:
    half = len(data) // 2
    space = max(data.rfind(b, half) for b in (b" ", b"\t", b"\r", b"\f", b"\v"))
    if space >= 0:
        return space + 1
    cut = len(data) - 1
    while cut > half and 0x80 <= data[cut] < 0xC0:  # a UTF-8 continuation byte: back up to its lead byte
        cut -= 1
    return cut


def _open_binary(path: Path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _json_field(line: str, field: str, path: Path, line_no: int) -> str:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise TextError(f"{path}:{line_no}: not a JSON object ({e.msg}); expected one JSON object per line") from None
    if not isinstance(obj, dict) or field not in obj:
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise TextError(f"{path}:{line_no}: no field {field!r} (found {keys}); pass PATH:FIELD to choose one")
    value = obj[field]
    if not isinstance(value, str):
        raise TextError(f"{path}:{line_no}: field {field!r} is {type(value).__name__}, expected a string")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # JSON may escape a lone surrogate ("\ud800"), which is not text
            raise TextError(f"{path}:{line_no}: field {field!r} holds a lone surrogate; expected valid Unicode") from None
    return value


def _column_documents(values: Iterable, where: str, field: str, start_row: int) -> Iterator[Document]:
    for row, value in enumerate(values, start=start_row):
        if value is None:
            continue
        if not isinstance(value, str):
            raise TextError(f"{where}: row {row} column {field!r} is {type(value).__name__}, expected a string")
        if value.strip():
            for piece in cut_pieces(value):
                yield Document(piece, where, row)


def open_parquet(f, where: str | os.PathLike):
    """``pyarrow.parquet.ParquetFile`` of a path or an open file; one that is not parquet is a
    :class:`TextError` naming ``where`` (every reader of parquet text, the corpus build's included)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise TextError(f"{where}: not a readable parquet file ({e})") from None


def _parquet_documents(source: TextSource, path: Path) -> Iterator[Document]:
    pf = open_parquet(path, path)
    names = pf.schema_arrow.names
    if source.field not in names:
        raise TextError(f"{path}: no column {source.field!r} (found {names}); pass PATH:COLUMN to choose one")
    row = 1
    for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=[source.field]):
        values = batch.column(0).to_pylist()
        yield from _column_documents(values, str(path), source.field, row)
        row += len(values)


def _disk_dataset_documents(source: TextSource, path: Path) -> Iterator[Document]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as e:
        raise TextError(f"{path}: not a folder written by datasets' save_to_disk ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        if source.split not in ds:
            raise TextError(f"{path}: no split {source.split!r} (found {sorted(ds)})")
        ds = ds[source.split]
    if source.field not in ds.column_names:
        raise TextError(f"{path}: no column {source.field!r} (found {ds.column_names}); pass PATH:COLUMN")
    row = 1
    for batch in ds.select_columns([source.field]).iter(batch_size=_BATCH_ROWS):
        values = batch[source.field]
        yield from _column_documents(values, str(path), source.field, row)
        row += len(values)


def _hub_documents(source: TextSource) -> Iterator[Document]:
    name = source.spec[len(HF_PREFIX):]
    if not Path(name).is_dir():
        _check_hub_reachable(source.spec)
    import datasets

    try:
        ds = datasets.load_dataset(name, source.config, split=source.split, streaming=True)
    except Exception as e:  # datasets raises many unrelated types for "cannot find or read this dataset"
        raise TextError(f"{source.spec}: cannot open dataset (config {source.config!r}, split {source.split!r}): {e}") from None
    row = 0
    for row, example in enumerate(ds, start=1):
        if source.field not in example:
            raise TextError(f"{source.spec}: row {row} has no field {source.field!r} (found {sorted(example)})")
        yield from _column_documents([example[source.field]], source.spec, source.field, row)


_REACHED: set[tuple[str, int]] = set()  # endpoints found reachable in this process: checked once, not per read


def _check_hub_reachable(spec: str) -> None:
    """A :class:`TextError` at once when the Hugging Face Hub cannot be reached and offline mode is not set:
    datasets would otherwise retry for about 25 s, printing 11 lines, before its own error. With
    ``HF_HUB_OFFLINE`` (or ``HF_DATASETS_OFFLINE``) set, datasets reads its cache and makes no request; behind
    a proxy (``HTTPS_PROXY`` and the like) a direct connection proves nothing, so datasets is left to try."""
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
           for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
        return
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    proxies = urllib.request.getproxies()
    if (host, port) in _REACHED or proxies.get(endpoint.scheme or "https") or proxies.get("all"):
        return
    try:
        socket.create_connection((host, port), timeout=HUB_CHECK_S).close()
    except OSError as e:
        raise TextError(f"{spec}: cannot reach the Hugging Face Hub at {host} ({e.strerror or e}); connect, or "
                        "set HF_HUB_OFFLINE=1 to read a dataset already in the local cache") from None
    _REACHED.add((host, port))
