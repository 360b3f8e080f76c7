"""The build's configuration: the arguments that decide the shards' content, what stage 1 made of them
(:class:`Checked`), and the errors a build refuses with. The stages, ``engine/`` and ``mixture/`` import it;
it imports only what its records are made of (``quality/``'s settings, ``shards/``' records)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from common.errors import InputError
from corpus.quality.dedup import DedupConfig
from corpus.quality.filters import CleanConfig
from corpus.shards.format import Manifest, TokenizerInfo
from fertility.text import TextSource
from fertility.tokenizers import Tokenizer


class BuildError(InputError):
    """A build that cannot go ahead; the message says why and what to do."""


class PlanError(InputError):
    """A mixture that cannot be planned: the message says which argument and what was expected. A build that
    meets one after its ingest keeps the ingest for the rerun (``corpus.engine.staging.staged``)."""


@dataclass
class IngestConfig:
    """Everything that decides the ingested documents (the executor and its number of workers do not)."""

    tokenizer: str
    tokenizer_dir: str | None = None
    compare_tokenizers: list[str] = field(default_factory=list)
    unit_docs: int = 1000  # documents per block when tasks split a file
    bad_utf8: str = "fail"  # "fail" or "skip"
    max_chars: int | None = None  # per source: keep the head of each source (whole documents)
    min_language_score: float | None = None  # parquet sources with a language_score column (FineWeb-2)
    clean: CleanConfig = field(default_factory=CleanConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)


@dataclass
class BuildConfig:
    """The arguments that decide the shards' content (recorded in the manifest as ``arguments``)."""

    sources: list[str]  # "LANG=SPEC", as corpus.read.sources.parse_source reads them
    tokens: int
    mix: dict[str, float] | None = None
    temperature: float | None = None
    max_epochs: float = 4.0
    seed: int = 0
    val_tokens: int = 100_000  # per language, taken out before the mixture is planned
    val_max_share: float = 0.1  # never hold out more than this share of a language's tokens
    shard_tokens: int = 100_000_000
    ingest: IngestConfig = field(default_factory=lambda: IngestConfig(tokenizer="gpt2"))

    def arguments(self) -> dict:
        """As plain JSON: what the manifest records, and what a rerun is compared against."""
        return json.loads(json.dumps(asdict(self)))


@dataclass
class Checked:
    """What stage 1 (``corpus.check``) made of the configuration, so that no later stage parses, loads or checks
    it again: the sources, the build's tokenizer and its manifest record, the comparison tokenizers' names, and
    what OUT holds (``existing``: the shard set an --append adds to, or this very build when ``done``)."""

    sources: list[TextSource]
    tokenizer: Tokenizer
    info: TokenizerInfo
    compare_names: list[str]
    existing: Manifest | None = None
    done: bool = False  # OUT is already this build: a rerun does nothing
