"""The build's configuration: the arguments that decide the shards' content, and the error a build refuses with."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import InputError
from corpus.ingest import IngestConfig


class BuildError(InputError):
    """A build that cannot go ahead; the message says why and what to do."""


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
