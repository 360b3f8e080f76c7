"""corpus.build end to end on the shipped sample: shares read back from the shards, round trip, errors."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import regex

from common.errors import InputError
from corpus.build import BuildConfig, BuildError, build, staging_path
from corpus.cli import main
from corpus.config import IngestConfig
from corpus.engine.executors import ExecutorConfig
from corpus.quality.filters import CleanConfig, clean_document
from corpus.shards.format import Manifest, read_shard
from corpus.shards.verify import documents, verify_shards
from fertility.text import iter_documents, parse_text_arg
from fertility.tokenizers import load_tokenizer

MAX_CHARS = 120_000
QUIET = ExecutorConfig(workers=1, progress=False)
MIX = {"bn": 0.6, "en": 0.4}
_BENGALI = regex.compile(r"\p{Bengali}")


def _sources(sample_dir):
    return [f"bn={sample_dir}/bn/literature-bnarchive.txt.gz", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz"]


def _config(sample_dir, **overrides) -> BuildConfig:
    ingest = IngestConfig(tokenizer="gpt2", compare_tokenizers=["o200k_base"], unit_docs=200, max_chars=MAX_CHARS)
    values = dict(sources=_sources(sample_dir), tokens=40_000, mix=MIX, seed=7, val_tokens=3_000,
                  shard_tokens=8_000, ingest=ingest)
    values.update(overrides)
    return BuildConfig(**values)


@pytest.fixture(scope="module")
def built(tmp_path_factory, sample_dir):
    out = tmp_path_factory.mktemp("shards")
    config = _config(sample_dir)
    manifest, prepared = build(config, out, executor=QUIET)
    return out, config, manifest


@pytest.fixture(scope="module")
def gpt2():
    return load_tokenizer("gpt2")


def _decoded(out, manifest, tok, split):
    for s in manifest.split(split):
        for doc in documents(read_shard(out / s.file), manifest.tokenizer.bos_id):
            yield s, doc, tok.decode(doc.tolist())


def test_manifest_matches_shard_contents(built, gpt2):
    out, _, manifest = built
    assert manifest.tokenizer.bos_id == gpt2.bos_id
    assert manifest.tokenizer.sha256 == gpt2.fingerprint
    assert load_tokenizer(manifest.tokenizer.spec).fingerprint == gpt2.fingerprint
    manifest.verify(out)
    assert verify_shards(out, manifest, progress=False).ok
    for s in manifest.shards:
        tokens = read_shard(out / s.file)
        assert int(tokens[0]) == gpt2.bos_id  # every shard starts a document
        # Counted independently: a document is Bangla when its decoded text is mostly Bengali letters.
        counts: dict[str, int] = {}
        for doc in documents(tokens, gpt2.bos_id):
            text = gpt2.decode(doc.tolist())
            lang = "bn" if len(_BENGALI.findall(text)) > len(text) / 3 else "en"
            counts[lang] = counts.get(lang, 0) + doc.size + 1
        assert counts == s.tokens_by_language, s.file
        if s.split == "val":
            assert list(counts) == [s.language]


def test_token_shares_on_target_counted_from_shards(built, gpt2):
    out, _, manifest = built
    total = {"bn": 0, "en": 0}
    for s in manifest.split("train"):
        tokens = read_shard(out / s.file)
        for doc in documents(tokens, manifest.tokenizer.bos_id):
            # Bengali byte-level BPE tokens of GPT-2 decode to Bengali text; classify on the ids' text.
            lang = "bn" if _BENGALI.search(gpt2.decode(doc[:50].tolist())) else "en"
            total[lang] += doc.size + 1
    share = total["bn"] / sum(total.values())
    assert abs(share - MIX["bn"]) < 0.005 * 2  # small build: a document is ~1% of the budget
    assert sum(total.values()) == pytest.approx(40_000, rel=0.02)


def test_decoded_documents_are_cleaned_source_documents(built, sample_dir, gpt2):
    out, config, manifest = built
    cleaned = set()
    for arg in config.sources:
        source = parse_text_arg(arg)
        c = Counter()
        for doc in iter_documents(source, max_chars=MAX_CHARS):
            text = clean_document(doc.text, source.lang, CleanConfig(), c)
            if text is not None:
                cleaned.add(text)
    train = [text for _, _, text in _decoded(out, manifest, gpt2, "train")]
    val = [text for _, _, text in _decoded(out, manifest, gpt2, "val")]
    assert train and val
    assert all(t in cleaned for t in train + val)
    assert not set(train) & set(val)  # held out by document before packing


def test_val_shards_record_language_chars_bytes(built, gpt2):
    out, _, manifest = built
    for lang in ("bn", "en"):
        shards = manifest.split("val", language=lang)
        assert shards
        for s in shards:
            texts = [text for doc in documents(read_shard(out / s.file), gpt2.bos_id) for text in [gpt2.decode(doc.tolist())]]
            assert s.chars == sum(len(t) for t in texts)
            assert s.bytes == sum(len(t.encode()) for t in texts)
            assert s.documents == len(texts)


def test_report_shows_units_and_inversion(built):
    out, _, _ = built
    report = json.loads((out / "report.json").read_text())
    shares = report["corpus_shares"]
    assert set(shares) == {"documents", "chars", "bytes", "tokens:gpt2", "tokens:o200k_base"}
    # Bengali: 3 bytes per character, and GPT-2 spends far more tokens on it than o200k does.
    assert shares["bytes"]["bn"] > shares["chars"]["bn"]
    assert shares["tokens:gpt2"]["bn"] > shares["tokens:o200k_base"]["bn"] + 0.1
    assert report["train_shares"]["tokens:gpt2"]["bn"] == pytest.approx(0.6, abs=0.02)
    assert (out / "report.md").read_text().count("| bn |") >= 2
    assert (out / "shares.png").stat().st_size > 10_000
    counters = {s["name"]: s["counters"] for s in report["sources"]}
    assert all(c["documents_in"] >= c["documents_kept"] > 0 for c in counters.values())


def test_rerun_is_a_no_op_and_other_args_need_append(built, sample_dir, tmp_path):
    out, config, manifest = built
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again, prepared = build(config, out, executor=QUIET)
    assert prepared is None and again == manifest
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    with pytest.raises(InputError, match="--append"):
        build(_config(sample_dir, seed=8), out, executor=QUIET)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_tokenizer_replaced_at_the_same_path_is_not_the_same_build(sample_dir, tmp_path):
    """Same arguments, but the tokenizer file at that path was retrained (the demo's second run did this):
    the old shards are not this build's; a rerun without --overwrite is refused, with it the shards are remade."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    root = Path(__file__).resolve().parents[2] / "data" / "tokenizers" / "gpt2"
    tok = Tokenizer(BPE.from_file(str(root / "vocab.json"), str(root / "merges.txt")))
    tok.add_special_tokens(["<|endoftext|>"])  # the BOS every shard document starts with
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    config = _config(sample_dir, tokens=10_000, ingest=IngestConfig(tokenizer=str(path), unit_docs=200,
                                                                    max_chars=40_000))
    out = tmp_path / "shards"
    first, _ = build(config, out, executor=QUIET)
    tok.add_tokens(["retrained"])  # another file at the same path: a new sha256
    tok.save(str(path))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(InputError, match="another tokenizer"):
        build(config, out, executor=QUIET)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    again, prepared = build(config, out, overwrite=True, executor=QUIET)
    assert prepared is not None
    assert again.tokenizer.sha256 != first.tokenizer.sha256
    assert verify_shards(out, again, progress=False).ok


def test_append_requires_the_same_tokenizer(built, sample_dir, tmp_path):
    out, _, manifest = built
    copy = tmp_path / "shards"
    shutil.copytree(out, copy)
    other = _config(sample_dir, ingest=IngestConfig(tokenizer="o200k_base", unit_docs=200, max_chars=MAX_CHARS))
    with pytest.raises(BuildError, match="tokenizer"):
        build(other, copy, append=True, executor=QUIET)
    assert Manifest.load(copy) == manifest
    small = _config(sample_dir, seed=9, tokens=10_000, ingest=IngestConfig(tokenizer="gpt2", unit_docs=200, max_chars=40_000))
    appended, _ = build(small, copy, append=True, executor=QUIET)
    names = [s.file for s in appended.shards]
    assert names[:len(manifest.shards)] == [s.file for s in manifest.shards]
    assert len(set(names)) == len(names) > len(manifest.shards)
    assert appended.arguments["previous"] == manifest.arguments
    assert verify_shards(copy, appended, progress=False).ok


def test_bad_utf8_fails_or_is_counted(sample_dir, tmp_path, capsys):
    with gzip.open(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", "rb") as f:
        lines = [next(f) for _ in range(30)]
    path = tmp_path / "bad.txt.gz"
    with gzip.open(path, "wb") as f:
        f.writelines(lines[:5] + [b"caf\xe9 \xff broken line\n"] + lines[5:])
    base = ["build", "--source", f"bn={path}", "--tokenizer", "gpt2", "--tokens", "2e4", "--mix", "bn=1",
            "--val-tokens", "2000", "--no-progress", "--workers", "1"]
    assert main(base + ["--out", str(tmp_path / "fail")]) == 2
    err = capsys.readouterr().err
    assert "bad.txt.gz" in err and "6" in err
    assert main(base + ["--out", str(tmp_path / "skip"), "--bad-utf8", "skip"]) == 0
    manifest = Manifest.load(tmp_path / "skip")
    assert manifest.sources[0]["counters"]["bad_utf8"] == 1
    assert manifest.sources[0]["counters"]["documents_in"] == 30


def test_plan_command_writes_no_shards(sample_dir, tmp_path, capsys):
    src = _sources(sample_dir)
    out = tmp_path / "p"
    assert main(["plan", "--source", src[0], "--source", src[1], "--tokenizer", "gpt2", "--tokens", "1e7",
                 "--mix", "bn=0.5,en=0.5", "--max-chars", "50000", "--max-epochs", "2", "--out", str(out),
                 "--no-progress", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "WARNING: en:" in text and "epochs" in text
    assert not list(out.glob("*.bin")) and not (out / "manifest.json").exists()
    # The ingest stays in the staging folder beside OUT for a later build: the task's token and metadata files;
    # OUT itself is not made.
    work = staging_path(out) / ".work"
    assert sorted(p.name for p in (work / "t1" / "docs").iterdir()) == ["00000.meta.npz", "00000.tokens"]
    assert not out.exists()
    ingested = (work / "t1" / "docs" / "00000.tokens").stat().st_mtime_ns
    assert main(["build", "--source", src[0], "--source", src[1], "--tokenizer", "gpt2", "--tokens", "1e4",
                 "--mix", "bn=0.5,en=0.5", "--max-chars", "50000", "--out", str(out), "--no-progress",
                 "--workers", "1", "--val-tokens", "1000", "--keep-work"]) == 0
    assert (out / "manifest.json").exists() and not staging_path(out).exists()
    assert (out / ".work" / "t1" / "docs" / "00000.tokens").stat().st_mtime_ns == ingested  # the plan's ingest


def test_inspect_reports_damage(built, tmp_path, capsys):
    out, _, manifest = built
    copy = tmp_path / "damaged"
    shutil.copytree(out, copy)
    assert main(["inspect", str(copy), "--recount", "--check-text", "5", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "OK: 5 sampled training documents" in printed and "train: " in printed
    assert main(["inspect", str(copy), "--no-summary", "--no-progress"]) == 0
    printed = capsys.readouterr().out  # verification alone, for a script that printed the build's summary
    assert printed.startswith("OK: ") and "train: " not in printed
    shard = copy / manifest.split("train")[0].file
    data = bytearray(shard.read_bytes())
    data[-2:] = (1234).to_bytes(2, "little")  # same size, different last token
    shard.write_bytes(bytes(data))
    assert main(["inspect", str(copy), "--no-progress"]) == 1
    assert "content hash differs" in capsys.readouterr().out
    shard.write_bytes(bytes(data[:-2]))
    assert main(["inspect", str(copy), "--no-progress"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_jsonl_field_source(sample_dir, tmp_path, gpt2):
    with gzip.open(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", "rt", encoding="utf-8") as f:
        poems = [next(f).rstrip("\n") for _ in range(12)]
    path = tmp_path / "poems.jsonl"
    path.write_text("".join(json.dumps({"id": i, "body": p}, ensure_ascii=False) + "\n" for i, p in enumerate(poems)),
                    encoding="utf-8")
    config = BuildConfig(sources=[f"bn={path}:body"], tokens=5_000, mix={"bn": 1.0}, val_tokens=1_000,
                         ingest=IngestConfig(tokenizer="gpt2"))
    manifest, _ = build(config, tmp_path / "out", executor=QUIET)
    assert manifest.sources[0]["field"] == "body"
    texts = {gpt2.decode(doc.tolist()) for s in manifest.shards
             for doc in documents(read_shard(tmp_path / "out" / s.file), gpt2.bos_id)}
    assert texts and texts <= {clean_document(p, "bn", CleanConfig(), Counter()) for p in poems}


def test_an_out_in_folders_not_made_yet_gets_them(sample_dir, tmp_path):
    """OUT's parent folders need not exist (the nearest existing one must be writable); the build makes
    them, where it failed with "No such file or directory" for its staging folder."""
    src = _sources(sample_dir)
    out = tmp_path / "not" / "yet" / "p"
    assert main(["plan", "--source", src[0], "--source", src[1], "--tokenizer", "gpt2", "--tokens", "1e4",
                 "--mix", "bn=0.5,en=0.5", "--max-chars", "20000", "--out", str(out), "--no-progress",
                 "--workers", "1"]) == 0
    assert (staging_path(out) / ".work").is_dir()
