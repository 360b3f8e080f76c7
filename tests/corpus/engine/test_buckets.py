"""The numpy MinHash stage 2 writes datatrove's pairs, byte for byte, with bounded blocks."""

from __future__ import annotations

import numpy as np
import pytest
from datatrove.io import get_datafolder
from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets

from corpus.engine.buckets import Buckets
from corpus.engine.steps import sorted_order
from corpus.quality.dedup import DedupConfig, minhash_config


def _write_sorted_signatures(folder, config, rng: np.random.Generator, docs_per_file: list[int],
                             values: int) -> None:
    """Signature files as stage 1 leaves them: per band and task, records sorted by (hashes, doc). Bands drawn
    from ``values`` distinct ones, half of them with their last hash redrawn, so that bands tie in full and in
    their first hashes only, within a file and across files."""
    record = np.dtype([("hashes", "<u8", (config.hashes_per_bucket,)), ("doc", "<u4")])
    top = 2**61 - 1
    for band in range(config.num_buckets):
        pool = rng.integers(0, top, size=(values, config.hashes_per_bucket), dtype=np.uint64)
        for rank, n in enumerate(docs_per_file):
            rows = np.zeros(n, dtype=record)
            rows["hashes"] = pool[rng.integers(0, values, size=n)]
            redrawn = rng.random(n) < 0.5
            rows["hashes"][redrawn, -1] = rng.integers(0, top, size=int(redrawn.sum()), dtype=np.uint64)
            rows["doc"] = rng.permutation(n)
            rows = rows[np.lexsort((rows["doc"], *rows["hashes"].T[::-1]))]
            with folder.open(f"bucket_{band:03d}/{rank:05d}.minhash.sig", "wb") as f:
                f.write(rows.tobytes())


def _dups(folder) -> dict[str, bytes]:
    out = {}
    for path in sorted(folder.list_files(glob_pattern="*.dups")):
        with folder.open(path, "rb") as f:
            out[path] = f.read()
    return out


@pytest.mark.parametrize(("docs_per_file", "values", "block"), [
    ([300, 250, 1, 0], 3, 4),      # few values: long runs of one first hash, far past a block of 4
    ([500, 480], 40, 16),
    ([2000, 1999, 7], 3000, 64),  # mostly distinct, some ties
    ([50], 2, 1_000),
])
def test_the_pairs_are_datatroves_byte_for_byte(tmp_path, docs_per_file, values, block):
    config = minhash_config(DedupConfig())
    sigs = get_datafolder(str(tmp_path / "sigs"))
    _write_sorted_signatures(sigs, config, np.random.default_rng(len(docs_per_file) + values), docs_per_file, values)
    theirs, ours = get_datafolder(str(tmp_path / "theirs")), get_datafolder(str(tmp_path / "ours"))
    for band in range(config.num_buckets):
        list(MinhashDedupBuckets(sigs, theirs, config=config).run(None, band, config.num_buckets) or [])
        list(Buckets(sigs, ours, config, block_records=block).run(None, band, config.num_buckets) or [])
    expected = _dups(theirs)
    assert len(expected) == config.num_buckets
    assert sum(len(v) for v in expected.values()) > 0, "the case should have pairs to compare"
    assert _dups(ours) == expected


def test_a_file_cut_inside_a_record_is_refused(tmp_path):
    config = minhash_config(DedupConfig())
    sigs = get_datafolder(str(tmp_path / "sigs"))
    _write_sorted_signatures(sigs, config, np.random.default_rng(0), [10], 5)
    with sigs.open("bucket_000/00000.minhash.sig", "ab") as f:
        f.write(b"\x01\x02")
    with pytest.raises(ValueError, match="partial record"):
        Buckets(sigs, get_datafolder(str(tmp_path / "ours")), config).run(None, 0, config.num_buckets)


@pytest.mark.parametrize("in_doc_order", [False, True])
@pytest.mark.parametrize("values", [2, 50, 2**61])
def test_signature_records_are_sorted_as_datatrove_sorts_them(values, in_doc_order):
    # datatrove's stage 1 sorts its records over every field (hashes, then document); ties on the first hash,
    # and on all hashes, are where a sort by the first hash alone would differ. The step writes its records in
    # document order, where runs of copies need no sorting: both orders, and copies among the ties
    r = minhash_config(DedupConfig()).hashes_per_bucket
    rng = np.random.default_rng(values % 1000)
    n = 5_000
    fields = np.dtype([(f"field{i + 1}", "<u8") for i in range(r)] + [(f"field{r + 1}", "<u4")])
    theirs = np.zeros(n, dtype=fields)
    pool = rng.integers(0, values, size=(max(2, n // 20), r), dtype=np.uint64)
    hashes = pool[rng.integers(0, len(pool), size=n)]
    hashes[rng.random(n) < 0.5, 1:] = rng.integers(0, values, size=(1, r - 1), dtype=np.uint64)
    for i in range(r):
        theirs[f"field{i + 1}"] = hashes[:, i]
    theirs[f"field{r + 1}"] = np.arange(n) if in_doc_order else rng.permutation(n)
    ours = np.frombuffer(theirs.tobytes(), dtype=[("hashes", "<u8", (r,)), ("doc", "<u4")])
    theirs.sort(order=fields.names)
    assert ours[sorted_order(ours)].tobytes() == theirs.tobytes()
