"""A small corpus build every executor must reproduce byte for byte (``small_build``): a FineWeb-2-schema parquet
file set and an English text file, the build's arguments as the command line takes them, and its output with
the local executor and one task."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from corpus.build import BuildConfig, build
from corpus.engine.executors import ExecutorConfig
from fertility.text import iter_documents, parse_text_arg


def _fineweb2_parquet(sample_dir: Path, folder: Path) -> None:
    """Two parquet files in FineWeb-2's schema, from the sample's Bangla text; every third row scores low."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [d.text for d in iter_documents(parse_text_arg(f"bn={sample_dir}/bn/poems-pd-banglakosh.txt.gz"),
                                            max_chars=60_000)]
    folder.mkdir()
    for part, rows in enumerate((texts[: len(texts) // 2], texts[len(texts) // 2:])):
        n = len(rows)
        pq.write_table(pa.table({
            "text": rows, "id": [f"<urn:uuid:{part}-{i}>" for i in range(n)], "dump": ["CC-MAIN-2024-10"] * n,
            "url": [f"https://example.org/{part}/{i}" for i in range(n)], "date": ["2024-02-20T00:00:00Z"] * n,
            "file_path": ["s3://commoncrawl/x.warc.gz"] * n, "language": ["ben"] * n,
            "language_score": [0.5 if i % 3 == 0 else 0.99 for i in range(n)], "language_script": ["Beng"] * n,
            "minhash_cluster_size": [1] * n, "top_langs": ['{"ben_Beng_score": 0.99}'] * n,
        }), folder / f"{part:03d}_00000.parquet")


def tree_sha256(directory: Path) -> dict[str, str]:
    """The sha256 of every file of a shard directory, by name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


@dataclass
class SmallBuild:
    """The build's ``args`` (``corpus build`` options but ``--out`` and the executor's), the same as a
    :class:`BuildConfig` (``config``), and ``local``: its output with the local executor and one task."""

    args: list[str]
    config: BuildConfig
    local: Path

    sha256 = staticmethod(tree_sha256)

    def same_as_local(self, out: Path) -> bool:
        return tree_sha256(out) == tree_sha256(self.local)


@pytest.fixture(scope="session")
def small_build(sample_dir, tmp_path_factory) -> SmallBuild:
    from corpus.cli import _config, build_parser

    parquet = tmp_path_factory.mktemp("fineweb2") / "ben_Beng"
    _fineweb2_parquet(sample_dir, parquet)
    args = ["--source", f"bn={parquet}/*.parquet", "--source", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz",
            "--tokenizer", "gpt2", "--unit-docs", "50", "--min-language-score", "0.872", "--tokens", "30000",
            "--mix", "bn=0.6,en=0.4", "--seed", "5", "--val-tokens", "2000", "--shard-tokens", "4000"]
    local = tmp_path_factory.mktemp("local1")
    config = _config(build_parser().parse_args(["build", *args, "--out", str(local)]))
    status = tmp_path_factory.mktemp("status") / "status.json"
    build(config, local, executor=ExecutorConfig(workers=1, tasks=1, progress=False, status_file=str(status)))
    (local.parent / "status.json").write_bytes(status.read_bytes())
    return SmallBuild(args, config, local)
