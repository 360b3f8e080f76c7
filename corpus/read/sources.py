"""Where documents come from, and which task reads which of them.

A source is one ``LANG=SPEC``. Local files and ``hf:NAME`` datasets are read by ``fertility.text`` (the
project's one way to read text). A glob or a URL (``hf://datasets/...``, ``s3://...``, ``data/*.parquet``) is
a **file set** read through fsspec: parquet (FineWeb-2's and FineWeb-Edu's layout: ``text``, ``id``,
``language``, ``language_score``, ...), JSONL or text files, in sorted order.

Every document gets a canonical id from its place in the sources, ``(source, file, row)``, that does not
depend on how many tasks read them. Tasks split the work by whole files when a file set has at least as many
files as there are tasks, and otherwise by blocks of ``unit_docs`` consecutive documents (every task then
reads the file and keeps its own blocks). Everything downstream orders documents by this id, which is what
makes the output the same for any number of tasks.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from common.cli import check_label
from fertility.text import (
    BadUTF8Error,
    TextError,
    TextSource,
    cut_pieces,
    iter_documents,
    open_parquet,
    parse_text_arg,
)

_GLOB_CHARS = "*?["
_FILE_BITS = 32  # canonical id = source << 48 | file << 32 | row
_SOURCE_BITS = 48


@dataclass(frozen=True)
class RawDocument:
    source: int
    uid: int  # canonical id
    text: str
    n_bytes: int  # UTF-8 bytes of ``text``
    done: float | None = None  # estimated share of the task's input read so far (None: unknown)


def is_file_set(spec: str) -> bool:
    """A glob or a URL: read through fsspec rather than ``fertility.text``."""
    return "://" in spec or any(c in spec for c in _GLOB_CHARS)


def parse_source(arg: str) -> TextSource:
    """``LANG=SPEC`` -> source; a file set may end in ``:FIELD`` (the JSONL field or parquet column). LANG is
    a label (it names validation shards, so it is never a path): checked here, before any work."""
    lang, sep, rest = arg.partition("=")
    if sep and lang.strip():
        check_label(lang.strip(), f"--source {arg!r}: label")
    if sep and lang.strip() and is_file_set(rest):
        path, colon, field = rest.rpartition(":")
        if colon and field and "/" not in field and path and not path.endswith(":"):
            return TextSource(lang.strip(), path, field)
        return TextSource(lang.strip(), rest)
    return parse_text_arg(arg)


def uid(source: int, file: int, row: int) -> int:
    return (source << _SOURCE_BITS) | (file << _FILE_BITS) | row


def source_of(uids):
    """The source index of canonical ids (works on ints and numpy arrays)."""
    return uids >> _SOURCE_BITS


def list_files(source: TextSource) -> list[str]:
    """The files of a file set, sorted, as URLs fsspec opens; ``[spec]`` for any other source."""
    if not is_file_set(source.spec):
        return [source.spec]
    import fsspec

    fs, path = fsspec.core.url_to_fs(source.spec)
    found = sorted(fs.glob(path)) if any(c in path for c in _GLOB_CHARS) else ([path] if fs.exists(path) else [])
    if not found:
        raise TextError(f"{source.spec}: matches no files")
    return [fs.unstrip_protocol(f) for f in found]


def check_sources(sources: list[TextSource], min_language_score: float | None) -> None:
    """Fail before any work on a source that cannot be read: a missing path, a file set that matches nothing,
    a parquet file set without the column to read (or ``language_score`` when it is filtered on)."""
    from pathlib import Path

    for source in sources:
        if not is_file_set(source.spec):
            if source.spec.startswith("hf:"):
                continue
            if not Path(source.spec).exists():
                raise TextError(f"{source.spec}: no such file or directory (expected a text, JSONL or parquet file)")
        first = list_files(source)[0]
        if first.lower().endswith(".parquet"):
            import fsspec

            with fsspec.open(first, "rb") as f:
                names = open_parquet(f, first).schema_arrow.names
            needed = [source.field] + (["language_score"] if min_language_score is not None else [])
            for column in needed:
                if column not in names:
                    raise TextError(f"{first}: no column {column!r} (found {names})"
                                    + ("; pass PATH:COLUMN to choose one" if column == source.field else
                                       "; --min-language-score filters on it"))


def _parquet_rows(url: str, field: str, min_language_score: float | None) -> Iterator[tuple[int, str, float | None]]:
    import fsspec

    with fsspec.open(url, "rb") as f:
        pf = open_parquet(f, url)
        names = pf.schema_arrow.names
        if field not in names:
            raise TextError(f"{url}: no column {field!r} (found {names}); pass PATH:COLUMN to choose one")
        score = min_language_score is not None
        if score and "language_score" not in names:
            raise TextError(f"{url}: no column 'language_score' (found {names}), which --min-language-score "
                            f"filters on; FineWeb-2 and FineWeb-Edu files have it")
        row = 0
        for batch in pf.iter_batches(batch_size=1024, columns=[field, "language_score"] if score else [field]):
            texts = batch.column(0).to_pylist()
            scores = batch.column(1).to_pylist() if score else [None] * len(texts)
            for text, s in zip(texts, scores, strict=True):
                if text is not None and not isinstance(text, str):
                    raise TextError(f"{url}: row {row + 1} column {field!r} is {type(text).__name__}, "
                                    f"expected a string")
                if text and text.strip():
                    yield row, text, s
                row += 1


def _line_rows(url: str, field: str | None, errors: str, counters: dict) -> Iterator[tuple[int, str, None]]:
    import fsspec

    with fsspec.open(url, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if url.endswith(".gz") else raw
        for line_no, line in enumerate(io.BufferedReader(stream) if url.endswith(".gz") else stream, start=1):
            try:
                text = line.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                if errors == "skip":
                    counters["bad_utf8"] = counters.get("bad_utf8", 0) + 1
                    continue
                raise TextError(f"{url}:{line_no}: not valid UTF-8; expected UTF-8 text (or --bad-utf8 skip)") from None
            if field is not None and text.strip():
                try:
                    text = json.loads(text)[field]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise TextError(f"{url}:{line_no}: no JSON field {field!r}; pass PATH:FIELD to choose one") from None
            if isinstance(text, str) and text.strip():
                yield line_no - 1, text, None


def _file_rows(source: TextSource, url: str, *, max_chars: int | None, errors: str, counters: dict,
               min_language_score: float | None) -> Iterator[tuple[int, str, float | None]]:
    """(row, text, language score) of one file; ``row`` numbers the rows (parquet) or documents of the file
    from 0. Parquet is read here, not by ``fertility.text``, for its ``language_score`` column."""
    name = url.lower()
    if name.endswith(".parquet"):
        yield from _cut_rows(_parquet_rows(url, source.field, min_language_score))
        return
    if not is_file_set(source.spec):
        try:
            for row, doc in enumerate(iter_documents(source, max_chars=max_chars, errors=errors, counters=counters)):
                yield row, doc.text, None
        except BadUTF8Error as e:  # fertility's message names no flag; this command's is --bad-utf8 skip
            raise e.with_hint("or --bad-utf8 skip") from None
        return
    if name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")):
        yield from _cut_rows(_line_rows(url, source.field, errors, counters))
    else:
        yield from _cut_rows(_line_rows(url, None, errors, counters))


def _cut_rows(rows: Iterator[tuple[int, str, float | None]]) -> Iterator[tuple[int, str, float | None]]:
    """``rows`` with each text cut as ``fertility.text`` cuts a long plain line (:func:`fertility.text.cut_pieces`:
    a text of 1 MiB of UTF-8 or more): its pieces are documents of consecutive rows, and every later row moves
    up by the extra pieces, as the pieces of a long line read by ``iter_documents`` are numbered. A file with
    no such text keeps its rows."""
    extra = 0
    for row, text, score in rows:
        n = 0
        for n, piece in enumerate(cut_pieces(text)):
            yield row + extra + n, piece, score
        extra += n


def _input_size(url: str) -> tuple[int, str] | None:
    """(size, unit) of a file's content for progress: parquet rows, or text bytes (a gzip file's trailer
    holds its size modulo 4 GiB); None where unknown (hub datasets)."""
    if url.startswith("hf:") and not url.startswith("hf://"):
        return None
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
        if path.lower().endswith(".parquet"):
            import pyarrow.parquet as pq

            with fs.open(path, "rb") as f:
                return pq.ParquetFile(f).metadata.num_rows, "rows"
        if path.lower().endswith(".gz"):
            with fs.open(path, "rb") as f:
                f.seek(-4, 2)
                return int.from_bytes(f.read(4), "little"), "bytes"
        return None if fs.isdir(path) else (fs.size(path), "bytes")
    except (OSError, ValueError):
        return None


class _Done:
    """The estimated share of a task's input read: files weighted by their size on disk, and within a file the
    rows or bytes read (or, with ``max_chars``, each source's characters against its limit)."""

    def __init__(self, plan: list[tuple[int, str]], n_sources: int, max_chars: int | None):
        import fsspec

        self.max_chars, self.n_sources = max_chars, n_sources
        self.sizes = {url: _input_size(url) for _, url in plan}
        disk = {}
        for _, url in plan:
            try:
                fs, path = fsspec.core.url_to_fs(url)
                disk[url] = max(1, fs.size(path) or 1)
            except (OSError, ValueError, TypeError):
                disk[url] = 1
        total = sum(disk.values()) or 1
        self.weight = {url: w / total for url, w in disk.items()}
        self.before = 0.0  # share of the files already finished

    def finish_file(self, url: str) -> None:
        self.before += self.weight.get(url, 0.0)

    def at(self, source: int, url: str, row: int, bytes_read: int, chars: int) -> float | None:
        if self.max_chars is not None:
            return min(1.0, (source + min(1.0, chars / self.max_chars)) / self.n_sources)
        size = self.sizes.get(url)
        if size is None or not size[0]:
            return None
        inside = (row + 1) / size[0] if size[1] == "rows" else bytes_read / size[0]
        return min(0.999, self.before + self.weight[url] * min(1.0, inside))


def partition(sources: list[TextSource], rank: int, world_size: int, *, unit_docs: int, max_chars: int | None,
              bad_utf8: str, min_language_score: float | None,
              counters: list[dict]) -> Iterator[RawDocument]:
    """The documents task ``rank`` of ``world_size`` reads, in canonical order.

    A source with at least ``world_size`` files (and no ``max_chars``) is split by file; any other by blocks of
    ``unit_docs`` documents, which every task reads past to find its own. Files and blocks are dealt round
    the tasks in one sequence over all sources (each kind its own), so that many small sources do not all
    start on the first task. ``counters[source]`` receives ``bad_utf8`` (from the one task that owns the file,
    or its first block) and, for documents dropped here, ``documents_in`` and ``drop_language_score``.
    """
    errors = "skip" if bad_utf8 == "skip" else "strict"
    files = [list_files(source) for source in sources]
    by_file = [len(f) >= world_size and max_chars is None for f in files]
    # The first file unit of each source split by file (known before reading anything).
    first_file = list(accumulate((len(f) if split else 0 for f, split in zip(files, by_file, strict=True)),
                                 initial=0))
    plan = [(s, url) for s, urls in enumerate(files) for f, url in enumerate(urls)
            if not by_file[s] or (first_file[s] + f) % world_size == rank]
    done = _Done(plan, len(sources), max_chars)
    block = 0  # blocks dealt so far: every task reads every block-split file through, so all count the same
    for s, source in enumerate(sources):
        chars = 0
        for f, url in enumerate(files[s]):
            owns_file = by_file[s] and (first_file[s] + f) % world_size == rank
            if by_file[s] and not owns_file:
                continue
            file_counters: dict = {}
            limit = None if max_chars is None else max_chars - chars
            bytes_read = rows = 0
            for row, text, score in _file_rows(source, url, max_chars=limit, errors=errors, counters=file_counters,
                                               min_language_score=min_language_score):
                rows = row + 1
                chars += len(text)
                n_bytes = len(text.encode("utf-8"))
                bytes_read += n_bytes + 1
                if owns_file or (block + row // unit_docs) % world_size == rank:
                    if min_language_score is not None and score is not None and score < min_language_score:
                        # Counted here, since the document never reaches the cleaning step that counts the rest.
                        for key in ("documents_in", "drop_language_score"):
                            counters[s][key] = counters[s].get(key, 0) + 1
                    else:
                        yield RawDocument(s, uid(s, f, row), text, n_bytes,
                                          done.at(s, url, row, bytes_read, chars))
                if max_chars is not None and chars >= max_chars:
                    break
            done.finish_file(url)
            if owns_file or (not by_file[s] and block % world_size == rank):
                counters[s]["bad_utf8"] = counters[s].get("bad_utf8", 0) + file_counters.get("bad_utf8", 0)
            if not by_file[s]:
                block += -(-rows // unit_docs)
            if max_chars is not None and chars >= max_chars:
                break
